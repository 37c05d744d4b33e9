"""Public ``__all__`` lists say what the packages export, and nothing keeps them in step
by hand but this: each name resolves, none is listed twice, a lazily loaded package's
two lists (its type-only imports, the loader's table, from which ``__all__`` is derived)
agree, and the Tune
facade covers a name or refuses it, never both. (Each registry's own test checks that
its entries are exported: ``tests/storage/test_schemes.py``,
``tests/schedulers/test_fifo.py::test_exports``.)"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

from orchestrator import search
from orchestrator.tune import unsupported

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = sorted(
    ".".join(init.relative_to(ROOT).parent.parts)
    for top in ("orchestrator", "storage", "transfer")
    for init in (ROOT / top).rglob("__init__.py")
)
LAZY = ["orchestrator", "orchestrator.tune"]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_listed_name_resolves_once(name: str) -> None:
    package = importlib.import_module(name)
    listed = list(getattr(package, "__all__", []))
    assert len(listed) == len(set(listed)), f"{name}.__all__ lists a name twice"
    missing = [n for n in listed if not hasattr(package, n)]
    assert not missing, f"{name}.__all__ names what it lacks: {missing}"


def type_only_imports(path: Path) -> dict[str, str]:
    """``name -> module`` of the ``if TYPE_CHECKING:`` imports of the file at ``path``,
    each as ``name as name``: the form that re-exports it to a type checker (mypy
    ``--strict`` reads no ``__all__`` that is not a literal list)."""
    found: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    for alias in stmt.names:
                        assert alias.asname == alias.name, (
                            f"{path}: write 'import {alias.name} as {alias.name}' so that "
                            "type checkers see it exported"
                        )
                        found[alias.name] = stmt.module
    return found


@pytest.mark.parametrize("name", LAZY)
def test_a_lazy_packages_two_lists_agree(name: str) -> None:
    """A name loaded on first use is written in two places (typed, found) and listed by
    derivation: each place names the same names, from the same module."""
    package = importlib.import_module(name)
    assert package.__file__ is not None
    typed = type_only_imports(Path(package.__file__))
    where: dict[str, str] = package._WHERE
    assert set(typed) == set(where) == set(package.__all__)
    for export, module in where.items():
        absolute = importlib.util.resolve_name(module, name)
        assert typed[export] == absolute, (export, typed[export], absolute)


def test_the_tune_facade_covers_or_refuses_a_name_never_both() -> None:
    for module, refused in unsupported.NAMES.items():
        facade = importlib.import_module(f"orchestrator.tune{'.' if module else ''}{module}")
        both = set(refused) & set(facade.__all__)
        assert not both, f"orchestrator.tune.{module}: {both} both covered and refused"


def test_every_tune_domain_function_is_trialflows_under_tunes_class() -> None:
    """A Tune search-space function (``tune.qrandn``) is at Tune's two paths
    (``tune.X``, ``tune.search.sample.X``) and is trialflow's of the same name; and
    every domain of ``orchestrator.search`` has its Tune class."""
    import orchestrator.tune as tune
    from orchestrator.tune.search import sample as tune_sample

    functions = [n for n in tune_sample.__all__ if n[0].islower() and n != "grid_search"]
    for name in functions:
        assert name in tune.__all__, name
        assert name in search.__all__, f"{name}: trialflow's own domain function"
    domains = {
        getattr(search, n)
        for n in search.__all__
        if isinstance(getattr(search, n), type)
        and issubclass(getattr(search, n), search.Domain)
        and getattr(search, n) is not search.Domain
    }
    assert domains == set(tune_sample._TUNE_CLASS), "a domain without its Tune class"
