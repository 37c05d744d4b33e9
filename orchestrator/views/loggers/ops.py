"""What the hook side hands the writing side: a per-trial list of operations, in order.

A result is queued as the result dict itself (the hot path allocates nothing else);
the rarer events are these small records. The hook side decides (a rollback, a config
change, a fresh start); the writers only carry the decisions out, in the flusher's
thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.core.trial_history import TRAINING_ITERATION

__all__ = ["ConfigChange", "End", "Op", "Reset", "Rollback", "TRAINING_ITERATION"]


@dataclass(frozen=True)
class Reset:
    """Start the trial's files afresh with ``config`` and the results it already has
    (``history``: non-empty when the experiment was resumed from its journal)."""

    config: Mapping[str, Any]
    history: list[Mapping[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Rollback:
    """The trial's history now ends at ``iteration``: later results leave the logs."""

    iteration: int


@dataclass(frozen=True)
class ConfigChange:
    """The trial's config became ``config`` for results after ``iteration``."""

    iteration: int
    config: Mapping[str, Any]


@dataclass(frozen=True)
class End:
    """The trial ended (or failed): record the summary and close its files. More
    operations may follow if the trial is revived; its files then reopen."""

    config: Mapping[str, Any]
    last_result: Mapping[str, Any] | None


Op = Mapping[str, Any] | Reset | Rollback | ConfigChange | End
MARKERS = (Reset, Rollback, ConfigChange, End)
