"""What of Ray Tune's API the facade does not cover, and what to use instead.

Two ways in: a name (``tune.run``, ``from orchestrator.tune.schedulers import PB2``),
answered by each facade module's ``__getattr__`` from :data:`NAMES`; and a module
(``orchestrator.tune.search.hyperopt``), answered by a finder placed last on
``sys.meta_path``, so only modules the facade does not have reach it. Either raises
:class:`~orchestrator.tune.error.TuneUnsupported` at once.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable, Sequence
from typing import Any

from orchestrator.tune.error import unsupported

__all__ = ["MODULES", "NAMES", "getattr_for", "install_finder", "refused_class"]

_OPTUNA = "use OptunaSearch (from orchestrator.tune.search.optuna) or the default search"
_REPORT = "call tune.report(metrics, checkpoint=...) from your framework's own callback or loop"

#: Names of Ray Tune's modules (relative to ``ray.tune``) -> what to use instead.
NAMES: dict[str, dict[str, str]] = {
    "": {
        "run_experiments": "use tune.Tuner(...).fit() once per experiment",
        "Experiment": "use tune.Tuner(...) with tune.RunConfig(name=...)",
        "register_env": "RLlib environments are not covered; pass your trainable to tune.Tuner",
        "register_trainable": "pass the trainable itself to tune.Tuner (no registry)",
        "JupyterNotebookReporter": "the live progress table is on by default (verbose=0: off)",
        "ProgressReporter": "the live progress table is on by default (verbose=0: off)",
        "create_searcher": "build the searcher class itself (orchestrator.tune.search)",
        "create_scheduler": "build the scheduler class itself (orchestrator.tune.schedulers)",
        "PlacementGroupFactory": (
            "use tune.with_resources(trainable, {'cpu': n, 'gpu': m, 'custom': k}): one "
            "bundle per trial"
        ),
        "ResumeConfig": "use tune.Tuner.restore(path, trainable, resume_errored=...)",
        "SyncConfig": (
            "checkpoints and logs are written to RunConfig(storage_path) directly (a path, "
            "s3:// or gs://); there is nothing to sync"
        ),
    },
    "schedulers": {
        "PB2": "use PopulationBasedTraining",
        "ResourceChangingScheduler": (
            "a trial's resources are fixed (tune.with_resources); use another scheduler"
        ),
        "TrialScheduler": (
            "a scheduler of your own subclasses orchestrator.schedulers.Scheduler (plain "
            "decisions as data) and may be given as TuneConfig(scheduler=...)"
        ),
        "create_scheduler": "build the scheduler class itself",
    },
    "search": {
        "SearchAlgorithm": "subclass orchestrator.tune.search.Searcher",
        "SearchGenerator": "pass your Searcher to TuneConfig(search_alg=...) directly",
        "create_searcher": "build the searcher class itself",
    },
    "stopper": {"NoopStopper": "leave RunConfig(stop=None)"},
    "progress_reporter": {
        "JupyterNotebookReporter": "the live progress table is on by default (verbose=0: off)",
        "ProgressReporter": "the live progress table is on by default (verbose=0: off)",
    },
}

#: Ray Tune's modules the facade does not have (relative to ``ray.tune``) -> instead.
MODULES: dict[str, str] = {
    "search.hyperopt": f"HyperOptSearch needs hyperopt: {_OPTUNA}",
    "search.ax": f"AxSearch needs Ax: {_OPTUNA}",
    "search.bayesopt": f"BayesOptSearch needs bayesian-optimization: {_OPTUNA}",
    "search.bohb": f"TuneBOHB needs ConfigSpace and hpbandster: {_OPTUNA}",
    "search.hebo": f"HEBOSearch needs HEBO: {_OPTUNA}",
    "search.nevergrad": f"NevergradSearch needs nevergrad: {_OPTUNA}",
    "search.zoopt": f"ZOOptSearch needs zoopt: {_OPTUNA}",
    "schedulers.pb2": "PB2 needs GPy: use PopulationBasedTraining",
    "schedulers.hb_bohb": "HyperBandForBOHB pairs with TuneBOHB: use HyperBandScheduler",
    "schedulers.resource_changing_scheduler": "a trial's resources are fixed",
    "integration": (
        "of Ray Tune's integrations ray_train, xgboost, lightgbm, pytorch_lightning, keras, "
        f"mlflow and wandb are covered: {_REPORT}"
    ),
    "examples": "Ray Tune's examples: import them from ray.tune.examples",
    "execution": "Ray Tune's controller internals have no counterpart here",
}

_PACKAGE = "orchestrator.tune"


def getattr_for(module: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` that names what to use instead of an uncovered Tune name
    of ``module`` ("" for ``orchestrator.tune`` itself), else raises AttributeError."""
    table = NAMES.get(module, {})
    where = f"{_PACKAGE}.{module}" if module else _PACKAGE

    def __getattr__(name: str) -> Any:
        instead = table.get(name)
        if instead is not None:
            raise unsupported(f"Ray Tune's {name} ({where})", instead)
        raise AttributeError(f"module {where!r} has no attribute {name!r}")

    return __getattr__


def refused_class(name: str, module: str, instead: str) -> type:
    """A stand-in for Tune's class ``name`` of ``module`` that imports (libraries import
    it to test ``isinstance``, which is then always False) but refuses to be built."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        raise unsupported(f"Ray Tune's {name} ({_PACKAGE}.{module})", instead)

    doc = f"Ray Tune's {name}: not covered ({instead}); importable for isinstance checks."
    return type(
        name, (), {"__init__": __init__, "__module__": f"{_PACKAGE}.{module}", "__doc__": doc}
    )


class _UnsupportedModules(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: asked only for modules nothing else found."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None) -> None:
        if not fullname.startswith(_PACKAGE + "."):
            return None
        relative = fullname[len(_PACKAGE) + 1 :]
        instead = MODULES.get(relative)
        if instead is None:
            parts = relative.split(".")
            instead = next(
                (
                    MODULES[".".join(parts[:n])]
                    for n in range(len(parts), 0, -1)
                    if ".".join(parts[:n]) in MODULES
                ),
                None,
            )
        if instead is None:
            instead = (
                "the facade covers Tuner, TuneConfig, RunConfig, report, Trainable, "
                "search, schedulers, stopper, logger, result and Callback (see README, "
                "'Coming from Ray Tune')"
            )
        raise unsupported(f"Ray Tune's module ray.tune.{relative} ({fullname})", instead)


def install_finder() -> None:
    if not any(isinstance(f, _UnsupportedModules) for f in sys.meta_path):
        sys.meta_path.append(_UnsupportedModules())
