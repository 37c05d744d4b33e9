"""trialflow's orchestrator: an asyncio event-driven control plane for trials on Ray.

The public names load on first use (PEP 562): Ray workers import
``orchestrator.actor.trial_actor`` for every trial actor, and should not pay for
importing the driver's loop, journal, hooks and storage to do so.

The package is in layers, one folder each (ARCHITECTURE.md draws them; ``make lint``
checks them): ``core`` (sans-IO rules), ``search`` and ``schedulers`` (decisions),
``actor`` (what runs in workers), ``integrations`` (beside a trial's function: Ray
Train runs as trials), ``engine`` (the driver's I/O), ``journal``, ``views``, ``sweeps``,
``api`` and ``cli``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.actor.function import get_checkpoint, report
    from orchestrator.actor.trainable import Trainable
    from orchestrator.api.orchestrator import Orchestrator, OrchestratorStatistics
    from orchestrator.api.sweep_result import SweepResult
    from orchestrator.api.trial import Trial
    from orchestrator.core.checkpoints import Checkpoint, RetentionPolicy
    from orchestrator.core.machine import TrialState
    from orchestrator.core.options import TrialOptions
    from orchestrator.engine.hooks import HOOK_NAMES
    from orchestrator.errors import (
        ConfigError,
        ExperimentLocked,
        InvalidTransition,
        JournalError,
        LeaseLost,
        NoCheckpointError,
        OrchestratorError,
        TrialError,
        TrialNotRunning,
    )

_WHERE = {
    "HOOK_NAMES": ".engine.hooks",
    "Checkpoint": ".core.checkpoints",
    "ConfigError": ".errors",
    "ExperimentLocked": ".errors",
    "InvalidTransition": ".errors",
    "JournalError": ".errors",
    "LeaseLost": ".errors",
    "NoCheckpointError": ".errors",
    "Orchestrator": ".api.orchestrator",
    "OrchestratorError": ".errors",
    "OrchestratorStatistics": ".api.orchestrator",
    "RetentionPolicy": ".core.checkpoints",
    "SweepResult": ".api.sweep_result",
    "Trainable": ".actor.trainable",
    "Trial": ".api.trial",
    "TrialError": ".errors",
    "TrialNotRunning": ".errors",
    "TrialOptions": ".core.options",
    "TrialState": ".core.machine",
    "get_checkpoint": ".actor.function",
    "report": ".actor.function",
}

__all__ = [
    "HOOK_NAMES",
    "Checkpoint",
    "ConfigError",
    "ExperimentLocked",
    "InvalidTransition",
    "JournalError",
    "LeaseLost",
    "NoCheckpointError",
    "Orchestrator",
    "OrchestratorError",
    "OrchestratorStatistics",
    "RetentionPolicy",
    "SweepResult",
    "Trainable",
    "Trial",
    "TrialError",
    "TrialNotRunning",
    "TrialOptions",
    "TrialState",
    "get_checkpoint",
    "report",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
