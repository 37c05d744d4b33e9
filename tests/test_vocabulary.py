"""One name, one thing: no two classes of the product code (``orchestrator``, ``storage``,
``transfer``) share a name, and no two of its modules share a file name, except where a
public path makes it so (:data:`SHARED_CLASSES`, :data:`SHARED_MODULES`, each with its
reason). A reader who meets ``TrialRecord`` or ``plan.py`` in a traceback should not
have to ask which one.

Each allowlist entry names every file that may hold the name, so a third copy fails,
and an entry that no longer names a duplicate fails too (drop it). The code is read by
its syntax tree: nothing is imported.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("orchestrator", "storage", "transfer")

_TUNE = "trialflow's own public class, and the Tune facade's at Ray Tune's path"

#: Class name -> (the files that define it, why the name is shared).
SHARED_CLASSES: dict[str, tuple[frozenset[str], str]] = {
    "Checkpoint": (
        frozenset({"orchestrator/core/checkpoints.py", "orchestrator/tune/checkpoint.py"}),
        f"{_TUNE}: orchestrator.Checkpoint, orchestrator.tune.Checkpoint (ray.tune)",
    ),
    "Trainable": (
        frozenset({"orchestrator/actor/trainable.py", "orchestrator/tune/trainable.py"}),
        f"{_TUNE}: orchestrator.Trainable (its path is in journals' pickles), "
        "orchestrator.tune.Trainable (ray.tune)",
    ),
    "Searcher": (
        frozenset({"orchestrator/search/searcher.py", "orchestrator/tune/search/searcher.py"}),
        f"{_TUNE}: orchestrator.search.Searcher, ray.tune.search.Searcher",
    ),
    "Domain": (
        frozenset({"orchestrator/search/domains.py", "orchestrator/tune/search/sample.py"}),
        f"{_TUNE}: orchestrator.search.Domain, ray.tune.search.sample.Domain (a subclass)",
    ),
    "OptunaSearch": (
        frozenset(
            {
                "orchestrator/search/optuna_search.py",
                "orchestrator/tune/search/optuna/optuna_search.py",
            }
        ),
        f"{_TUNE}: orchestrator.search.OptunaSearch, ray.tune.search.optuna (a subclass)",
    ),
    "ReportCallback": (
        frozenset(
            f"orchestrator/integrations/{m}.py"
            for m in ("keras", "lightgbm", "lightning", "xgboost")
        ),
        "one per framework module, documented as orchestrator.integrations.<framework>"
        ".ReportCallback (the module says which framework, as Ray Tune's do)",
    ),
    "TuneReportCallback": (
        frozenset(
            f"orchestrator/tune/integration/{m}.py"
            for m in ("keras", "lightgbm", "pytorch_lightning", "ray_train", "xgboost")
        ),
        "Ray Tune's name in each of its per-framework modules (ray.tune.integration.<m>)",
    ),
    "TuneReportCheckpointCallback": (
        frozenset(
            f"orchestrator/tune/integration/{m}.py"
            for m in ("keras", "lightgbm", "pytorch_lightning", "xgboost")
        ),
        "Ray Tune's name in each of its per-framework modules (ray.tune.integration.<m>)",
    ),
}

_MIRROR = "the Tune facade mirrors Ray Tune's module path (ray.tune.<...>)"
_PICKLED = (
    "a path old journals' pickles name, kept importable (a re-export at the top level; "
    "the shims' own work moves them)"
)

#: File name -> (the files of that name, why they share it).
SHARED_MODULES: dict[str, tuple[frozenset[str], str]] = {
    "errors.py": (
        frozenset({"orchestrator/errors.py", "storage/errors.py", "transfer/errors.py"}),
        "one error family per top-level package (storage and transfer stand alone)",
    ),
    "trainable.py": (
        frozenset(
            {
                "orchestrator/trainable.py",
                "orchestrator/actor/trainable.py",
                "orchestrator/tune/trainable.py",
            }
        ),
        f"{_PICKLED}; actor/trainable.py is the class's own (pickled) path; {_MIRROR}",
    ),
    "stopping.py": (
        frozenset({"orchestrator/stopping.py", "orchestrator/core/stopping.py"}),
        f"{_PICKLED}: stop conditions are pickled into the journal",
    ),
    "function.py": (
        frozenset({"orchestrator/function.py", "orchestrator/actor/function.py"}),
        f"{_PICKLED}: function trainables are pickled into the journal",
    ),
    "demo_model.py": (
        frozenset({"orchestrator/demo_model.py", "orchestrator/cli/demo_model.py"}),
        f"{_PICKLED}: journals name the demo's trainable by this import path",
    ),
    **{
        f"{m}.py": (
            frozenset(
                {f"orchestrator/integrations/{m}.py", f"orchestrator/tune/integration/{m}.py"}
            ),
            f"named for the framework: integrations/ is trialflow's, tune/integration/ {_MIRROR}",
        )
        for m in ("keras", "lightgbm", "xgboost", "mlflow", "wandb", "ray_train")
    },
    "pbt.py": (
        frozenset({"orchestrator/schedulers/pbt.py", "orchestrator/tune/schedulers/pbt.py"}),
        f"the scheduler, and {_MIRROR}",
    ),
    "hyperband.py": (
        frozenset(
            {"orchestrator/schedulers/hyperband.py", "orchestrator/tune/schedulers/hyperband.py"}
        ),
        f"the scheduler, and {_MIRROR}",
    ),
    "searcher.py": (
        frozenset({"orchestrator/search/searcher.py", "orchestrator/tune/search/searcher.py"}),
        f"the searchers' contract, and {_MIRROR}",
    ),
    "optuna_search.py": (
        frozenset(
            {
                "orchestrator/search/optuna_search.py",
                "orchestrator/tune/search/optuna/optuna_search.py",
            }
        ),
        f"the searcher, and {_MIRROR}",
    ),
    "base.py": (
        frozenset(
            {
                "orchestrator/schedulers/base.py",
                "orchestrator/tune/schedulers/base.py",
                "storage/base.py",
            }
        ),
        "an extension point's contract, each in its own package (Scheduler, Storage); "
        "tune/schedulers/base.py holds FIFOScheduler, pickled into journals and "
        "trialflow_tuner.pkl with a sweep's call (a path old pickles name)",
    ),
    "sample.py": (
        frozenset({"orchestrator/tune/sample.py", "orchestrator/tune/search/sample.py"}),
        f"{_MIRROR} (search/sample.py); tune/sample.py holds the wrapper of a Tune "
        "sample_from function, pickled with a sweep's space (a path old pickles name)",
    ),
    "registry.py": (
        frozenset({"orchestrator/schedulers/registry.py", "orchestrator/search/registry.py"}),
        "an extension point's registry, each in its own package (schedulers, searchers)",
    ),
    "trial_logs.py": (
        frozenset({"orchestrator/core/trial_logs.py", "orchestrator/journal/trial_logs.py"}),
        "one concept at two layers: the rules (core, sans-IO) and their storage side",
    ),
    "repair.py": (
        frozenset(
            {
                "orchestrator/journal/repair.py",
                "orchestrator/api/repair.py",
                "orchestrator/cli/repair.py",
            }
        ),
        "one command at three layers: the rebuild (journal), under the lease (api), "
        "and the command (cli/ names each module for its subcommand)",
    ),
}


def product_files() -> list[Path]:
    return sorted(p for top in PRODUCT for p in (ROOT / top).rglob("*.py"))


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def classes_by_name(paths: list[Path]) -> dict[str, set[str]]:
    """Every class (nested ones too) -> the files that define one of that name."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                found[node.name].add(rel(path))
    return found


def shared(found: dict[str, set[str]], allowed: dict[str, tuple[frozenset[str], str]]) -> list[str]:
    """What is wrong: a name in several places the allowlist does not name exactly, and
    an allowlist entry that no longer names a shared name."""
    problems = []
    for name, where in sorted(found.items()):
        if len(where) < 2:
            continue
        if name not in allowed:
            problems.append(f"{name} is in {len(where)} places: {sorted(where)}: rename one")
        elif where != allowed[name][0]:
            problems.append(f"{name} is in {sorted(where)}, allowed in {sorted(allowed[name][0])}")
    for name in sorted(allowed):
        if len(found.get(name, ())) < 2:
            problems.append(f"{name} is allowed to be shared but is not: drop its entry")
    return problems


def test_no_two_product_classes_share_a_name() -> None:
    problems = shared(classes_by_name(product_files()), SHARED_CLASSES)
    assert not problems, "\n".join(problems)


def test_no_two_product_modules_share_a_file_name() -> None:
    found: dict[str, set[str]] = defaultdict(set)
    for path in product_files():
        if path.name != "__init__.py":
            found[path.name].add(rel(path))
    problems = shared(found, SHARED_MODULES)
    assert not problems, "\n".join(problems)


def test_every_shared_name_says_why() -> None:
    for name, (where, why) in {**SHARED_CLASSES, **SHARED_MODULES}.items():
        assert len(where) >= 2 and why.strip(), name
        assert all((ROOT / path).is_file() for path in where), name


def test_no_submodule_is_named_as_a_name_its_package_loads_lazily() -> None:
    """Importing ``pkg.x`` binds ``pkg.x`` to the module: a package that exports a
    function ``x`` on first use (PEP 562, as ``orchestrator.tune.run`` was) would then
    hand out the module instead. (An export the ``__init__`` binds itself wins.)"""
    clashes = []
    for init in sorted(p for top in PRODUCT for p in (ROOT / top).rglob("__init__.py")):
        exported: set[str] = set()
        bound: set[str] = set()
        for node in ast.parse(init.read_text()).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, ast.Assign):
                names = {t.id for t in node.targets if isinstance(t, ast.Name)}
                bound |= names
                if "__all__" in names:
                    exported = set(ast.literal_eval(node.value))
        submodules = {p.stem for p in init.parent.glob("*.py")} | {
            p.parent.name for p in init.parent.glob("*/__init__.py")
        }
        lazy = exported - bound
        clashes += [f"{rel(init.parent)}/{name}" for name in sorted(lazy & submodules)]
    assert not clashes, f"rename these modules (they shadow a lazy export): {clashes}"


def test_the_checks_find_a_shared_name() -> None:
    found = {"Plan": {"a/plan.py", "b/plan.py"}, "Trial": {"api/trial.py"}}
    assert shared(found, {}) == ["Plan is in 2 places: ['a/plan.py', 'b/plan.py']: rename one"]
    assert shared(found, {"Plan": (frozenset({"a/plan.py", "b/plan.py"}), "why")}) == []
    assert shared(found, {"Trial": (frozenset({"api/trial.py", "x.py"}), "why")}) != []
