"""What a trial is at any moment (:class:`TrialState`), why a running one stopped asking
for steps (:class:`Intent`), and the knobs it is run with (:class:`TrialPolicy`).

The policy is built once, when the trial is added or adopted (``core.spec.policy_for``:
its spec, the experiment's settings, the judge, the metrics its judges read, the
experiment's hook progress), and is frozen: nothing changes it afterwards.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from orchestrator.core.backoff import Backoff
from orchestrator.core.checkpoints import RetentionPolicy
from orchestrator.core.judge import Judge, NoJudge

__all__ = ["HookProgressView", "Intent", "TrialPolicy", "TrialState"]


class TrialState(enum.Enum):
    PENDING = "PENDING"
    STARTING = "STARTING"
    RESTORING = "RESTORING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"
    ERROR = "ERROR"

    @property
    def is_terminal(self) -> bool:
        return self in (TrialState.TERMINATED, TrialState.ERROR)

    @property
    def is_settled(self) -> bool:
        """Nothing will happen to the trial unless somebody asks (terminal or paused)."""
        return self in (TrialState.TERMINATED, TrialState.ERROR, TrialState.PAUSED)

    @property
    def has_actor(self) -> bool:
        return self in (TrialState.STARTING, TrialState.RESTORING, TrialState.RUNNING)


class Intent(enum.Enum):
    """Why a trial with an actor stopped asking for train steps: a decision waits for
    what is in flight. Higher value wins (a stop is not undone by a later pause)."""

    RESTORE = 1
    PAUSE = 2
    STOP = 3


class HookProgressView(Protocol):
    """How far a trial's queued (user's) ``on_trial_result`` hooks have got."""

    def seen(self, trial_id: str) -> int | None:
        """How many of the trial's results they have processed (counted since the
        experiment was entered); None: no such hooks pace the trial."""
        ...


@dataclass(frozen=True, slots=True)
class TrialPolicy:
    """The per-trial knobs the machine decides with (derived from the trial's spec and
    the experiment's settings: ``core.spec.policy_for``). Frozen: built once."""

    checkpoint_every: int = 0
    max_failures: int = 0  # -1: no limit
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)
    judge: Judge = field(default_factory=NoJudge)
    restart_backoff: Backoff = field(default_factory=lambda: Backoff(0.0, 30.0))
    fallback_to_scratch: bool = False  # when no checkpoint can be loaded, start over
    steps_per_call: int = 1  # > 1: the actor may run ahead, never past a decision point
    time_slice: float | None = None  # adaptive: a call runs steps for about this long
    max_pending_saves: int = 2  # unpersisted checkpoints a trial may train ahead of
    # Metrics the trial's first result must report, each with what uses it ("its stop
    # criterion", "the sweep's metric"...): a name that is not there is an error at
    # once, not a trial that never stops or a sweep that learns nothing.
    required_metrics: Mapping[str, str] = field(default_factory=dict)
    # False for a trainable that checkpoints only when it says so (a function's
    # report(checkpoint=...)): no final save on pause or stop, which could only write
    # an empty checkpoint; a paused one resumes from its newest reported checkpoint.
    saves_on_demand: bool = True
    # How far the trial's queued (user's) on_trial_result hooks have got; None: the
    # trial has none. With them, a train call is asked for only once they have seen
    # every result up to those of the call before, so the trial never runs more than
    # two calls past what its hooks have seen, and a hook's request on a result lands
    # near it. A stable object of the experiment's, bound to its hook runner while the
    # experiment is entered.
    hook_progress: HookProgressView | None = None
    # Seconds a stop or pause waits for a call in flight (a step, a restore) before the
    # trial's actor is killed; at least twice its longest step so far. Saves in flight
    # when that runs out get ``save_grace_s`` more (an upload has its own retry limit).
    stop_grace_s: float = 30.0
    save_grace_s: float = 300.0

    def __post_init__(self) -> None:
        # A read-only copy: the caller's dict cannot change the policy afterwards.
        object.__setattr__(self, "required_metrics", _frozen_metrics(self.required_metrics))


#: Read-only required-metrics maps, shared by the policies that require the same ones: a
#: sweep's ten thousand trials require the same one or two (issue 36: a copy each was
#: some 220 bytes a trial for the whole experiment). Few distinct maps exist; bounded.
_FROZEN: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = {}


def _frozen_metrics(required: Mapping[str, str]) -> Mapping[str, str]:
    key = tuple(required.items())
    try:
        frozen = _FROZEN.get(key)
    except TypeError:  # an unhashable value: a copy of its own
        return MappingProxyType(dict(required))
    if frozen is None:
        frozen = MappingProxyType(dict(required))
        if len(_FROZEN) < 256:
            _FROZEN[key] = frozen
    return frozen
