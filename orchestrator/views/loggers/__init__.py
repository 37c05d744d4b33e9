"""Per-trial logs in Ray Tune's layout: ``params.json``, ``result.json``,
``progress.csv`` and TensorBoard event files, written off the event loop and kept equal
to each trial's history across rollbacks. Use :class:`ExperimentLogger` as a hook."""

from orchestrator.views.loggers.hook import ExperimentLogger, LoggerStatistics
from orchestrator.views.loggers.log_sink import trial_dirname
from orchestrator.views.loggers.values import flatten
from orchestrator.views.loggers.writers import (
    DEFAULT_LOGGERS,
    LOGGERS,
    WRITERS,
    LoggerKind,
    TrialWriter,
    register_logger,
)

__all__ = [
    "DEFAULT_LOGGERS",
    "LOGGERS",
    "WRITERS",
    "ExperimentLogger",
    "LoggerKind",
    "LoggerStatistics",
    "TrialWriter",
    "flatten",
    "register_logger",
    "trial_dirname",
]
