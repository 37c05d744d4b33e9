"""The tests mirror the layers: each test file lies in the folder of the layer it tests
(``tests/core``, ``tests/engine``, ``tests/api``, ...), helpers two folders need live in
``tests/support``, and no module imports a test module or a ``conftest``: a helper a test
file defines is its own, and moving or renaming that file breaks nothing else.

Loose in ``tests/`` are only the checks of the whole project (:data:`PROJECT_WIDE`).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent

#: Test files about the project as a whole, not one layer: the layer rules, the
#: architecture doc and the API reference against the code, the packages' ``__all__``,
#: and this file.
PROJECT_WIDE = frozenset(
    {
        "test_architecture_doc.py",
        "test_docs_api.py",
        "test_exports.py",
        "test_layers.py",
        "test_test_layout.py",
        "test_vocabulary.py",
    }
)


def module_name(path: Path, tests: Path) -> str:
    """``tests/engine/test_loop.py`` -> ``tests.engine.test_loop``."""
    parts = path.relative_to(tests.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, tests: Path) -> list[tuple[int, str]]:
    """Every ``tests.*`` module ``path`` imports (relative imports resolved), with the
    line; ``from pkg import name`` counts ``pkg.name`` too (it may be a module)."""
    package = module_name(path, tests).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return [(line, m) for line, m in found if m == "tests" or m.startswith("tests.")]


def defining_test_module(module: str) -> str | None:
    """The test module (``test_*`` or ``conftest``) ``module`` is or lies in, if any."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("test_") or part == "conftest":
            return ".".join(parts[: i + 1])
    return None


def import_problems(tests: Path) -> list[str]:
    """Imports of a test module or conftest, and of another folder's helper that is not
    in ``tests.support``: each as ``file:line imports module``."""
    problems: dict[str, None] = {}  # in order, once each
    for path in sorted(tests.rglob("*.py")):
        here = module_name(path, tests).split(".")
        for line, module in imported_modules(path, tests):
            parts = module.split(".")
            shared = defining_test_module(module)
            if shared is not None:
                where = f"{path.relative_to(tests.parent)}:{line} imports {shared}"
                problems[f"{where} (a test module: move what it shares to tests/support)"] = None
            elif (
                len(parts) > 2
                and parts[1] != "support"
                and (len(here) < 3 or parts[1] != here[1])
                and (tests / parts[1]).is_dir()
            ):
                where = f"{path.relative_to(tests.parent)}:{line} imports {'.'.join(parts[:3])}"
                problems[f"{where} (another folder's helper: move it to tests/support)"] = None
    return list(problems)


def loose_test_files(tests: Path) -> list[str]:
    return sorted(p.name for p in tests.glob("test_*.py") if p.name not in PROJECT_WIDE)


def test_no_test_module_imports_another_test_module() -> None:
    assert import_problems(TESTS) == []


def test_no_test_file_lies_loose_in_tests() -> None:
    loose = loose_test_files(TESTS)
    assert loose == [], f"move these into the folder of the layer they test: {loose}"


def test_every_test_folder_is_a_package() -> None:
    """Test files of two folders may share a name (``tests/engine/test_first_hour.py``,
    ``tests/api/test_first_hour.py``) only if each folder is a package."""
    folders = {p.parent for p in TESTS.rglob("test_*.py")}
    missing = sorted(str(f.relative_to(TESTS)) for f in folders if not (f / "__init__.py").exists())
    assert missing == []
