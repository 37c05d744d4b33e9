"""Ray Tune's API on trialflow's engine: change ``from ray import tune`` to
``from orchestrator import tune`` (and ``from ray.tune.X import Y`` to
``from orchestrator.tune.X import Y``); the rest of a Tune script stays as it is.

``tune.Tuner(...).fit()`` runs as one ``Orchestrator.sweep``; Tune's searchers and
schedulers are trialflow's under Tune's names and arguments; a training function's
``tune.report`` is trialflow's ``report``. What is not covered raises
:class:`~orchestrator.tune.error.TuneUnsupported` at once, naming it and what to use
instead. See the README's "Coming from Ray Tune".

Code that imports ``ray.tune`` itself and cannot be edited (a library such as Hugging
Face's ``Trainer.hyperparameter_search(backend="ray")``) runs on the facade after
``orchestrator.tune.install()``, which makes ``ray.tune`` resolve to this package in
this process and in its trials' workers (:mod:`orchestrator.tune.alias`).

Names load on first use (PEP 562): a trial's worker imports this module to run a Tune
function, and should not load the driver's machinery to do so.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from orchestrator.tune.unsupported import getattr_for, install_finder

if TYPE_CHECKING:
    from orchestrator.tune.adapters import with_parameters, with_resources
    from orchestrator.tune.alias import install, uninstall
    from orchestrator.tune.analysis import ExperimentAnalysis
    from orchestrator.tune.callback import Callback
    from orchestrator.tune.checkpoint import Checkpoint
    from orchestrator.tune.config import CheckpointConfig, FailureConfig, RunConfig, TuneConfig
    from orchestrator.tune.context import TuneContext, get_checkpoint, get_context, report
    from orchestrator.tune.error import TuneError, TuneUnsupported
    from orchestrator.tune.progress_reporter import CLIReporter
    from orchestrator.tune.result_grid import Result, ResultGrid
    from orchestrator.tune.sample import grid_search
    from orchestrator.tune.search.sample import (
        choice,
        lograndint,
        loguniform,
        qlograndint,
        qloguniform,
        qrandint,
        qrandn,
        quniform,
        randint,
        randn,
        sample_from,
        uniform,
    )
    from orchestrator.tune.stopper import Stopper
    from orchestrator.tune.trainable import Trainable
    from orchestrator.tune.tune import run
    from orchestrator.tune.tuner import Tuner

_WHERE = {
    "CLIReporter": ".progress_reporter",
    "Callback": ".callback",
    "Checkpoint": ".checkpoint",
    "CheckpointConfig": ".config",
    "ExperimentAnalysis": ".analysis",
    "FailureConfig": ".config",
    "Result": ".result_grid",
    "ResultGrid": ".result_grid",
    "RunConfig": ".config",
    "Stopper": ".stopper",
    "Trainable": ".trainable",
    "TuneConfig": ".config",
    "TuneContext": ".context",
    "TuneError": ".error",
    "TuneUnsupported": ".error",
    "Tuner": ".tuner",
    "get_checkpoint": ".context",
    "get_context": ".context",
    "report": ".context",
    "run": ".tune",
    "with_parameters": ".adapters",
    "with_resources": ".adapters",
    "grid_search": ".sample",
    "install": ".alias",
    "uninstall": ".alias",
    **{
        name: ".search.sample"  # Tune's Domain classes (Float...), trialflow's domains
        for name in (
            "choice",
            "lograndint",
            "loguniform",
            "qlograndint",
            "qloguniform",
            "qrandint",
            "qrandn",
            "quniform",
            "randint",
            "randn",
            "sample_from",
            "uniform",
        )
    },
}

__all__ = [
    "CLIReporter",
    "Callback",
    "Checkpoint",
    "CheckpointConfig",
    "ExperimentAnalysis",
    "FailureConfig",
    "Result",
    "ResultGrid",
    "RunConfig",
    "Stopper",
    "Trainable",
    "TuneConfig",
    "TuneContext",
    "TuneError",
    "TuneUnsupported",
    "Tuner",
    "choice",
    "get_checkpoint",
    "get_context",
    "grid_search",
    "install",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "report",
    "run",
    "sample_from",
    "uniform",
    "uninstall",
    "with_parameters",
    "with_resources",
]

install_finder()
_uncovered = getattr_for("")


#: Submodules reachable as attributes (``tune.result.SHOULD_CHECKPOINT``), as on Tune.
_SUBMODULES = (
    "callback",
    "experiment",
    "logger",
    "progress_reporter",
    "result",
    "result_grid",
    "schedulers",
    "search",
    "stopper",
    "trainable",
    "tune_config",
    "tuner",
    "utils",
)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    where = _WHERE.get(name)
    if where is None:
        return _uncovered(name)
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
