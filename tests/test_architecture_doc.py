"""Every module, path and class ARCHITECTURE.md names in backticks exists.

A page that names `resume.adopt_experiment` after the module moved teaches a wrong map,
so this test reads the code (by its syntax tree: nothing is imported) and checks each
backticked token of the page that looks like code:

- a **path**, a token with a ``/`` or ending in ``.py`` (``engine/loop.py``,
  ``core/machine/``, ``core/best``, ``tests/support/observe.py``): some file or folder of the
  repository ends with it (or with it and ``.py``), whole components
  (``loggers/values.py`` finds ``orchestrator/views/loggers/values.py``); a path with
  a name after it (``core/results.flatten``) is that module and a dotted name in it.
  Tokens with ``<``, ``*`` or a space are patterns, not paths, and are skipped.
- a **dotted name** (``core.machine.TrialMachine``, ``trial_runtime.Observer``,
  ``Journal.urgent``, ``Trial.save()``; arguments and a return annotation are cut):
  its longest leading part that is a module (by its full dotted name or a trailing
  part of it: ``engine.trial_runtime``, ``trial_runtime``) must define the next part, and a class
  named there the part after it (a method, a class attribute or an attribute set on
  ``self``, its bases' included); or its first part is a class of ours and the second
  a member of it. A first part that is neither is an error, unless it is another
  library's (``ray``, ``asyncio``: :data:`OUTSIDE`) or a variable the page uses in an
  example (``trial.save()``: :data:`OUTSIDE` too).
- a **CamelCase name** (``TrialSpec``, ``SaveDone``): a class or top-level name of
  ours, unless it is another library's (:data:`OUTSIDE_NAMES`).

File names of data (``experiment_state.json``), constants, environment variables and
plain lower-case words are not checked.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "ARCHITECTURE.md"
CODE = ("orchestrator", "storage", "transfer", "benchmarks", "tests", "tools")

#: First parts of dotted names that are not ours: other libraries, and the variables
#: of the page's examples.
OUTSIDE = {
    "anyio", "asyncio", "json", "np", "os", "ray", "socket", "sys", "torch", "wandb",
    "mlflow", "optuna", "botocore", "aiohttp", "Checkpoint", "RayTaskError", "trial",
    "rt", "self", "tune_config", "e", "pd", "queue", "functools",
}  # fmt: skip
#: CamelCase names of other libraries (Python's, Ray's, Ray Tune's) the page mentions.
OUTSIDE_NAMES = {
    "BaseException", "CapacityLimiter", "ExceptionGroup", "KeyboardInterrupt",
    "MlflowClient", "SystemExit", "TaskGroup", "TorchTrainer", "TuneError", "ValueError",
    "WorkerCallback", "ConnectionError", "TimeoutError", "RuntimeError", "None", "NaN",
    "Infinity", "XGBoostTrainer",
}  # fmt: skip
#: Paths the page names that are places on disk a run writes, not code.
DATA_PATHS = {"wandb/trialflow-steps/", "../shared/design.md", "trialflow/rollback", "a/b"}

DATA_SUFFIXES = (".json", ".jsonl", ".csv", ".pkl", ".md", ".txt", ".png", ".wandb")
CAMEL = re.compile(r"_?[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*")
DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*(/\w+)*)+")


class Module:
    """What one source file defines: top-level names, and per class its members and
    the names of its bases."""

    def __init__(self, path: Path) -> None:
        tree = ast.parse(path.read_text(), str(path))
        self.names: set[str] = set()
        self.classes: dict[str, tuple[set[str], list[str]]] = {}
        for node in tree.body:
            self.names |= _bound(node)
            if isinstance(node, ast.ClassDef):
                self.classes[node.name] = (_members(node), [_base(b) for b in node.bases])


def _bound(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(node, (ast.If, ast.Try)):
        inner = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
        for handler in getattr(node, "handlers", []):
            inner += handler.body
        return set().union(*(_bound(n) for n in inner)) if inner else set()
    return set()


def _members(cls: ast.ClassDef) -> set[str]:
    found: set[str] = set()
    for node in cls.body:
        found |= _bound(node)
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            found.add(node.attr)
    return found


def _base(node: ast.expr) -> str:
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


@cache
def modules() -> dict[str, Module]:
    found = {}
    for top in CODE:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = Module(path)
    return found


@cache
def classes() -> dict[str, list[tuple[set[str], list[str]]]]:
    """Every class of ours by name (a name may be defined in several modules)."""
    found: dict[str, list[tuple[set[str], list[str]]]] = {}
    for module in modules().values():
        for name, entry in module.classes.items():
            found.setdefault(name, []).append(entry)
    return found


def has_member(cls: str, member: str, seen: frozenset[str] = frozenset()) -> bool:
    for members, bases in classes().get(cls, []):
        if member in members:
            return True
        if any(has_member(b, member, seen | {cls}) for b in bases if b not in seen):
            return True
    return False


@cache
def repo_paths() -> frozenset[tuple[str, ...]]:
    skip = {".git", ".venv", "site", "node_modules", "__pycache__"}
    found = set()
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT).parts
        if not skip.intersection(rel):
            found.add(rel)
    return frozenset(found)


def path_exists(token: str) -> bool:
    want = tuple(p for p in token.strip("/").split("/") if p)
    return any(p[-len(want) :] == want for p in repo_paths() if len(p) >= len(want))


def resolve(token: str) -> str | None:
    """None if ``token`` names something that exists; else what is missing."""
    parts = token.split(".")
    if "/" in parts[-1]:  # `Trial.restore/pause/resume/stop`: each of them
        *head, alternatives = parts
        for last in alternatives.split("/"):
            missing = resolve(".".join([*head, last]))
            if missing:
                return missing
        return None
    known = modules()
    for k in range(len(parts), 0, -1):
        prefix = ".".join(parts[:k])
        found = [m for name, m in known.items() if name == prefix or name.endswith("." + prefix)]
        if not found:
            continue
        rest = parts[k:]
        if not rest:
            return None
        for module in found:
            if rest[0] in module.names and (
                len(rest) == 1 or rest[0] not in module.classes or has_member(rest[0], rest[1])
            ):
                return None
        return f"{'.'.join(rest)} in module {prefix}"
    if parts[0] in classes():
        if has_member(parts[0], parts[1]):
            return None
        return f"{parts[1]} of class {parts[0]}"
    if parts[0] in OUTSIDE:
        return None
    return f"a module or class named {parts[0]}"


def tokens() -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(DOC.read_text().splitlines(), 1):
        found += [(number, t) for t in re.findall(r"`([^`\n]+)`", line)]
    return found


def problem(token: str) -> str | None:
    if any(c in token for c in "<* ,=") or token in DATA_PATHS:
        return None
    code = re.sub(r"\(.*", "", token).split(" ->")[0].strip()
    if code.endswith(DATA_SUFFIXES):
        return None
    if "/" in code and re.fullmatch(r"[\w./-]+", code) and not DOTTED.fullmatch(code):
        last = code.rstrip("/").rpartition("/")[2]
        if "." in last and not last.endswith(".py"):  # `core/results.flatten`
            where, _, name = code.rpartition(".")
            if not path_exists(where + ".py"):
                return f"no file {where}.py"
            missing = resolve(where.replace("/", ".") + "." + name)
            return f"no {missing}" if missing else None
        found = path_exists(code) or path_exists(code + ".py")
        return None if found else f"no file or folder {code}"
    if code.endswith(".py"):
        return None if path_exists(code) else f"no file {code}"
    if DOTTED.fullmatch(code):
        missing = resolve(code)
        return f"no {missing}" if missing else None
    if CAMEL.fullmatch(code) and code not in OUTSIDE_NAMES:
        defined = code in classes() or any(code in m.names for m in modules().values())
        return None if defined else f"no class or name {code}"
    return None


def test_every_name_in_architecture_md_exists() -> None:
    missing = [
        f"ARCHITECTURE.md:{number}: `{token}`: {why}"
        for number, token in tokens()
        if (why := problem(token))
    ]
    assert not missing, "\n".join(missing)


def test_the_checker_finds_a_missing_name() -> None:
    """The rules above catch what the page once named and the code no longer has."""
    assert problem("runtime.Waiter") is not None
    assert problem("resume.adopt_experiment") is not None
    assert problem("sweep_plan.check_continues") is not None
    assert problem("engine/nowhere.py") is not None
    assert problem("Journal.no_such_method") is not None
    assert problem("NoSuchClass") is not None
    assert problem("engine.trial_runtime.Waiter") is None
    assert problem("trial_runtime.Observer") is None
    assert problem("Journal.urgent") is None
    assert problem("core/machine/") is None
