"""trialflow's orchestrator: an asyncio event-driven control plane for trials on Ray.

The public names load on first use (PEP 562): Ray workers unpickle
``orchestrator.trainable`` for every trial actor, and should not pay for importing the
driver's loop, journal, hooks and storage to do so.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .checkpoints import Checkpoint, RetentionPolicy
    from .errors import (
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
    from .function import get_checkpoint, report
    from .hooks import HOOK_NAMES
    from .lifecycle import TrialState
    from .orchestrator import Orchestrator, OrchestratorStatistics
    from .sweep_result import SweepResult
    from .trainable import Trainable
    from .trial import Trial

_WHERE = {
    "HOOK_NAMES": ".hooks",
    "Checkpoint": ".checkpoints",
    "ConfigError": ".errors",
    "ExperimentLocked": ".errors",
    "InvalidTransition": ".errors",
    "JournalError": ".errors",
    "LeaseLost": ".errors",
    "NoCheckpointError": ".errors",
    "Orchestrator": ".orchestrator",
    "OrchestratorError": ".errors",
    "OrchestratorStatistics": ".orchestrator",
    "RetentionPolicy": ".checkpoints",
    "SweepResult": ".sweep_result",
    "Trainable": ".trainable",
    "Trial": ".trial",
    "TrialError": ".errors",
    "TrialNotRunning": ".errors",
    "TrialState": ".lifecycle",
    "get_checkpoint": ".function",
    "report": ".function",
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
