"""Check the layering: no import circle, and each layer imports only below it.

Every import counts: top-level, under ``TYPE_CHECKING`` and inside functions, because
each is a real dependency a reader must follow. Run ``python tools/check_layers.py``
(``make lint`` and ``make test`` do); it exits 1 and names every circle and every
forbidden import.

Three packages are checked, as one graph:

- ``orchestrator``: the layers, bottom first (ARCHITECTURE.md draws them): a module may
  import its own layer and the layers below it, never one above.
- ``storage`` and ``transfer``: libraries below the orchestrator that stand alone: they
  import no other package of ours. Their modules do not reach into another module's
  private names either: no ``from .x import _name`` (a private *module* is fine: it is
  the package's own), and no ``obj._name`` on anything but ``self`` or ``cls``. A helper
  module that needs a driver's internals gets them passed, named (``S3Object``).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "orchestrator"
#: Standalone libraries: no import of another package of ours, no private reach-ins.
LIBRARIES = ("storage", "transfer")

#: Bottom first. A name is a top-level module or a folder of ``orchestrator``.
LAYERS: list[tuple[str, ...]] = [
    ("errors", "ctrl_c", "timeouts"),
    ("core",),
    ("search", "schedulers"),
    ("actor",),
    # Other libraries' integrations: what runs beside a trial's function (Ray Train, the
    # frameworks' report callbacks) and trackers' hooks; over the actor's function API
    # and core, below the engine.
    ("integrations",),
    ("engine",),
    ("journal",),
    ("views",),
    ("sweeps",),
    ("api",),
    ("tune",),
    ("cli", "__main__"),
    # The package's face: re-exports only.
    ("__init__",),
]
#: Layers that must stay sans-IO: no Ray, no asyncio (nor what wraps them).
SANS_IO = ("core", "search", "schedulers")
FORBIDDEN_IN_SANS_IO = ("ray", "asyncio", "anyio", "storage", "transfer")


def module_name(path: Path) -> str:
    """``orchestrator/core/machine/__init__.py`` -> ``orchestrator.core.machine``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {
        module_name(p): p
        for top in (PACKAGE, *LIBRARIES)
        for p in sorted((ROOT / top).rglob("*.py"))
    }


def imported_names(path: Path, name: str) -> Iterator[tuple[str, int]]:
    """Absolute names of everything `path` imports, with the line of each import."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                yield f"{prefix}.{alias.name}", node.lineno


def resolve(target: str, known: dict[str, Path]) -> str | None:
    """The orchestrator module an imported name lives in, or None for outside names."""
    while target:
        if target in known:
            return target
        target = target.rpartition(".")[0]
    return None


def layer_of(module: str) -> int:
    """The orchestrator layer's rank; -1 for the libraries below all of them."""
    parts = module.split(".")
    if parts[0] in LIBRARIES:
        return -1
    first = parts[1] if len(parts) > 1 else "__init__"
    for rank, names in enumerate(LAYERS):
        if first in names:
            return rank
    raise SystemExit(f"{module}: in no layer; add its folder to LAYERS in {__file__}")


def outside_imports(path: Path, name: str) -> Iterator[tuple[str, int]]:
    for target, line in imported_names(path, name):
        if not target.startswith(PACKAGE + ".") and target != PACKAGE:
            yield target, line


def forbidden(edges: dict[str, dict[str, int]]) -> list[str]:
    """Imports of a higher layer, and Ray/asyncio in the sans-IO layers."""
    found = []
    known = modules()
    for name, deps in sorted(edges.items()):
        top = name.split(".")[0]
        if top in LIBRARIES:
            for dep, line in sorted(deps.items()):
                if dep.split(".")[0] != top:
                    where = known[name].relative_to(ROOT)
                    found.append(f"{where}:{line}: {name} imports {dep}: {top} stands alone")
            continue
        rank = layer_of(name)
        for dep, line in sorted(deps.items()):
            if layer_of(dep) > rank:
                found.append(
                    f"{known[name].relative_to(ROOT)}:{line}: {name} imports {dep}, a higher layer"
                )
        if name.split(".")[1:2] and name.split(".")[1] in SANS_IO:
            for target, line in outside_imports(known[name], name):
                top = target.split(".")[0]
                if top in FORBIDDEN_IN_SANS_IO:
                    where = known[name].relative_to(ROOT)
                    found.append(f"{where}:{line}: {name} imports {top} (a sans-IO layer)")
    return found


def private_reach(known: dict[str, Path]) -> list[str]:
    """In the libraries: imports of another module's private names, and ``x._name`` on
    anything but ``self``/``cls``."""
    found = []
    for name, path in sorted(known.items()):
        if name.split(".")[0] not in LIBRARIES:
            continue
        where = path.relative_to(ROOT)
        for target, line in imported_names(path, name):
            last = target.rpartition(".")[2]
            if _private(last) and target not in known:
                found.append(f"{where}:{line}: {name} imports the private name {target}")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Attribute)
                and _private(node.attr)
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                found.append(
                    f"{where}:{node.lineno}: {name} reaches into {ast.unparse(node)}, "
                    "a private name of another object: pass what it needs explicitly"
                )
    return found


def _private(attr: str) -> bool:
    return attr.startswith("_") and not attr.startswith("__")


def graph() -> dict[str, dict[str, int]]:
    known = modules()
    edges: dict[str, dict[str, int]] = {m: {} for m in known}
    for name, path in known.items():
        for target, line in imported_names(path, name):
            dep = resolve(target, known)
            if dep is None or dep == name:
                continue
            edges[name].setdefault(dep, line)
    return edges


def circles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return found


if __name__ == "__main__":
    edges = graph()
    bad = circles(edges)
    for comp in bad:
        print(f"circle ({len(comp)} modules):")
        for m in comp:
            inner = [d for d in edges[m] if d in comp]
            print(f"  {m} -> {', '.join(inner)}")
    wrong = forbidden(edges) + private_reach(modules())
    for line in wrong:
        print(line)
    if not bad and not wrong:
        print(
            f"layers ok: {len(edges)} modules, no circle, no import of a higher layer, "
            f"no private reach-in in {' or '.join(LIBRARIES)}"
        )
    sys.exit(1 if bad or wrong else 0)
