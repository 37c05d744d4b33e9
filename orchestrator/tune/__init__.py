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

# Each public name twice: imported here for type checkers (``X as X`` exports it to
# them) and in ``_WHERE`` for the loader; ``__all__`` is derived from ``_WHERE``.
# tests/test_exports.py checks that the two agree.
if TYPE_CHECKING:
    from orchestrator.tune.adapters import with_parameters as with_parameters
    from orchestrator.tune.adapters import with_resources as with_resources
    from orchestrator.tune.alias import install as install
    from orchestrator.tune.alias import uninstall as uninstall
    from orchestrator.tune.analysis import ExperimentAnalysis as ExperimentAnalysis
    from orchestrator.tune.callback import Callback as Callback
    from orchestrator.tune.checkpoint import Checkpoint as Checkpoint
    from orchestrator.tune.config import CheckpointConfig as CheckpointConfig
    from orchestrator.tune.config import FailureConfig as FailureConfig
    from orchestrator.tune.config import RunConfig as RunConfig
    from orchestrator.tune.config import TuneConfig as TuneConfig
    from orchestrator.tune.context import TuneContext as TuneContext
    from orchestrator.tune.context import get_checkpoint as get_checkpoint
    from orchestrator.tune.context import get_context as get_context
    from orchestrator.tune.context import report as report
    from orchestrator.tune.error import TuneError as TuneError
    from orchestrator.tune.error import TuneUnsupported as TuneUnsupported
    from orchestrator.tune.progress_reporter import CLIReporter as CLIReporter
    from orchestrator.tune.result_grid import Result as Result
    from orchestrator.tune.result_grid import ResultGrid as ResultGrid
    from orchestrator.tune.sample import grid_search as grid_search
    from orchestrator.tune.search.sample import choice as choice
    from orchestrator.tune.search.sample import lograndint as lograndint
    from orchestrator.tune.search.sample import loguniform as loguniform
    from orchestrator.tune.search.sample import qlograndint as qlograndint
    from orchestrator.tune.search.sample import qloguniform as qloguniform
    from orchestrator.tune.search.sample import qrandint as qrandint
    from orchestrator.tune.search.sample import qrandn as qrandn
    from orchestrator.tune.search.sample import quniform as quniform
    from orchestrator.tune.search.sample import randint as randint
    from orchestrator.tune.search.sample import randn as randn
    from orchestrator.tune.search.sample import sample_from as sample_from
    from orchestrator.tune.search.sample import uniform as uniform
    from orchestrator.tune.stopper import Stopper as Stopper
    from orchestrator.tune.trainable import Trainable as Trainable
    from orchestrator.tune.tune import run as run
    from orchestrator.tune.tuner import Tuner as Tuner

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

__all__ = sorted(_WHERE)  # every name the loader finds, and no other

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
