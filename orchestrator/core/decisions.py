"""Decisions: what should happen to a trial now, as data. One vocabulary for everyone.

A scheduler returns these (:mod:`orchestrator.schedulers` re-exports them), a judge
returns one about the result it was shown, and the public ``Trial.stop()``, ``pause()``,
``resume()`` and ``restore()`` send them too: every decision reaches the trial's machine
as one event, :class:`~orchestrator.core.events.Decided`, and the machine's table says
what each does in each state (:mod:`orchestrator.core.machine`). So a user's ``stop()``
and a scheduler's :class:`Stop` are the same thing, carried out the same way.

Small frozen dataclasses, no behaviour; sans-IO like the rest of ``core``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DECISION_KINDS",
    "Continue",
    "Decision",
    "Hold",
    "Pause",
    "RestoreFrom",
    "Resume",
    "Stop",
]


@dataclass(frozen=True)
class Decision:
    """Base of every decision: what should happen to ``trial_id`` now."""

    trial_id: str


@dataclass(frozen=True)
class Continue(Decision):
    """Keep training (a held trial trains again)."""


@dataclass(frozen=True)
class Stop(Decision):
    """End the trial: TERMINATED, not an error.

    Whoever decides it (the user, a scheduler, the stop criterion, a function trainable
    that returned), a trial that checkpoints (``checkpoint_every > 0``) and saves on
    demand saves a final checkpoint first, unless its newest iteration is saved already
    or storage is down; a failure after the stop was decided ends it TERMINATED too (it
    is not restarted only to reach the same decision again).

    ``at_once``: settle now, without waiting for what is in flight: a step, restore or
    save under way is abandoned (its actor is killed), nothing more of it is recorded,
    and no final checkpoint is saved. For ending a whole run on a failure (a sweep's
    ``fail_fast``), where a result arriving after the decision must not count.
    """

    at_once: bool = False


@dataclass(frozen=True)
class Pause(Decision):
    """Save and release the trial's actor and resources (a pause always saves, unless
    its newest iteration is saved already, storage is down or the trainable saves only
    when it says so); a later Resume, Stop or restore decides its fate."""


@dataclass(frozen=True)
class Hold(Decision):
    """Keep the trial's actor (and resources) but run no further step until a later
    decision about it: Continue releases it; Stop or a restore end the wait their way. For
    a short wait, where Pause's save and new actor would cost more than the wait."""


@dataclass(frozen=True)
class Resume(Decision):
    """A PAUSED (or ERROR) trial continues from its newest checkpoint; a trial still
    pausing keeps running instead."""


@dataclass(frozen=True)
class RestoreFrom(Decision):
    """Roll the trial back (mid-run) or bring it back (settled) to ``checkpoint``, which
    may be another trial's, and continue from it; with ``config``, continue with that
    config. A scheduler's restore with a new config is its ``Exploit``."""

    checkpoint: Any  # a Checkpoint (a scheduler's plain snapshots may hold their own)
    config: Mapping[str, Any] | None = None


#: The decisions the machine knows, each a column of its table; a subclass (a
#: scheduler's ``Exploit``) is carried out as the kind it derives from.
DECISION_KINDS: tuple[type[Decision], ...] = (Continue, Stop, Pause, Hold, Resume, RestoreFrom)
