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

# Each public name twice: imported here for type checkers (``X as X`` exports it to
# them) and in ``_WHERE`` for the loader; ``__all__`` is derived from ``_WHERE``.
# tests/test_exports.py checks that the two agree.
if TYPE_CHECKING:
    from orchestrator.actor.function import get_checkpoint as get_checkpoint
    from orchestrator.actor.function import report as report
    from orchestrator.actor.trainable import Trainable as Trainable
    from orchestrator.api.orchestrator import Orchestrator as Orchestrator
    from orchestrator.api.orchestrator import OrchestratorStatistics as OrchestratorStatistics
    from orchestrator.api.sweep_result import SweepResult as SweepResult
    from orchestrator.api.trial import Trial as Trial
    from orchestrator.core.checkpoints import Checkpoint as Checkpoint
    from orchestrator.core.checkpoints import RetentionPolicy as RetentionPolicy
    from orchestrator.core.machine import TrialState as TrialState
    from orchestrator.core.options import TrialOptions as TrialOptions
    from orchestrator.engine.hooks import HOOK_NAMES as HOOK_NAMES
    from orchestrator.errors import ConfigError as ConfigError
    from orchestrator.errors import ExperimentLocked as ExperimentLocked
    from orchestrator.errors import InvalidTransition as InvalidTransition
    from orchestrator.errors import JournalError as JournalError
    from orchestrator.errors import LeaseLost as LeaseLost
    from orchestrator.errors import NoCheckpointError as NoCheckpointError
    from orchestrator.errors import OrchestratorError as OrchestratorError
    from orchestrator.errors import TrialError as TrialError
    from orchestrator.errors import TrialNotRunning as TrialNotRunning

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

__all__ = sorted(_WHERE)  # every name the loader finds, and no other


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
