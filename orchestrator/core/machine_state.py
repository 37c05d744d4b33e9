"""What a trial is at any moment: its :class:`TrialState`, the knobs it is run with
(:class:`TrialPolicy`), and :class:`MachineState`, the record the trial's machine keeps
together with the small moves that change it (start an actor, release it, want an end,
ask for a save).

The moves are not decisions: which one happens on which event is the transition table's
business, in :mod:`orchestrator.core.machine`. Like it, this file imports neither Ray nor
asyncio.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from orchestrator.core.backoff import Backoff
from orchestrator.core.checkpoints import Checkpoint, RetentionPolicy
from orchestrator.core.events import (
    Action,
    ArmGrace,
    DeleteCheckpoints,
    Event,
    Notify,
    ReleaseCheckpoint,
    Save,
    StartActor,
    StopActor,
)
from orchestrator.core.judge import Judge, NoJudge
from orchestrator.errors import InvalidTransition, TrialError

__all__ = ["Intent", "MachineState", "TrialPolicy", "TrialState"]

_Machine = TypeVar("_Machine", bound="MachineState")


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
    """Why a RUNNING trial stopped asking for train steps. Higher value wins."""

    RESTORE = 1
    PAUSE = 2
    FINISH = 3
    STOP = 4


@dataclass
class TrialPolicy:
    """The per-trial knobs the machine decides with (derived from the trial's spec and
    the experiment's settings: ``spec.policy_for``)."""

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
    # How many of the trial's results its queued (user's) on_trial_result hooks have
    # processed so far; None: it has none. With them, a train call is asked for only
    # once they have seen every result up to those of the call before, so the trial
    # never runs more than two calls past what its hooks have seen, and a hook's
    # request on a result lands near it (set when the trial is attached to a loop).
    hooks_seen: Callable[[], int] | None = None
    # Seconds a stop or pause waits for a call in flight (a step, a restore) before the
    # trial's actor is killed; at least twice its longest step so far. Saves in flight
    # when that runs out get ``save_grace_s`` more (an upload has its own retry limit).
    stop_grace_s: float = 30.0
    save_grace_s: float = 300.0


class MachineState:
    """A trial's record (what ran, what is in flight, what is wanted) and the moves that
    keep it consistent; :class:`~orchestrator.core.machine.TrialMachine` decides which move
    each event makes."""

    def __init__(self, trial_id: str, policy: TrialPolicy | None = None) -> None:
        self.trial_id = trial_id
        self.policy = policy or TrialPolicy()
        self.state = TrialState.PENDING
        self.generation = 0
        self.iteration = 0
        # The trial's *timeline*: the checkpoints its current run descends from, oldest
        # first. ``checkpoints`` are its own; ``origin`` is where the timeline starts
        # when that is not one of them (another trial's checkpoint after an exploit or
        # a clone). A checkpoint newer than the point a run restarted from, or from
        # before an exploit, is on no timeline: it leaves the record at once and goes
        # to ``dropped`` (see :meth:`_start_timeline`).
        self.checkpoints: list[Checkpoint] = []
        self.origin: Checkpoint | None = None
        # Keys of its own checkpoints that left the record, and why (for a clear error
        # when someone asks to restore one).
        self.dropped: dict[str, str] = {}
        self.num_failures = 0  # every failure, for the record
        self.failures_counted = 0  # against max_failures; reset when the user revives it
        self.consecutive_failures = 0  # for back-off; reset by the next result
        self.error: BaseException | None = None  # the last failure, until it recovers
        self.errors: list[BaseException] = []  # every failure, oldest first
        self.metrics_checked = False
        self.last_metrics: Mapping[str, Any] | None = None
        self.last_step_s = 0.0  # the newest result's time_this_iter_s
        self.longest_step_s = 0.0
        # Work in flight on the current actor.
        self.train_in_flight = False
        self.saves_in_flight = 0
        self.saved_iteration = -1  # the last iteration a save was asked for
        self.intent: Intent | None = None
        self.intent_checkpoint: Checkpoint | None = None
        self.intent_config: Mapping[str, Any] | None = None  # a RESTORE with a new config
        self.held = False  # the judge holds it: no step until a Decided event
        # Results reported, results its result hooks have processed (both counted from
        # this machine's start), the first count when the newest train call was asked
        # for, and whether training waits for the hooks (see TrialPolicy.hooks_seen).
        self.results_reported = 0
        self.results_hooked = 0
        self.reported_at_call = 0
        self.waiting_for_hooks = False
        # The stop or pause waiting for a call in flight has a grace period (ArmGrace);
        # the token tells its expiry from an earlier one's.
        self.grace_armed = False
        self.grace_extended = False  # saves in flight got their extra time
        self.grace_token = 0
        self.save_wanted = False  # SaveRequested: save after the next result
        # What a starting actor restores once it is ready (None: a fresh start), and
        # with which new config (None: the one it was set up with).
        self.restore_target: Checkpoint | None = None
        self.restore_config: Mapping[str, Any] | None = None
        self.bad_checkpoints: set[str] = set()
        self.storage_down = False  # a save could not be persisted: no final save either

    @classmethod
    def resumed(
        cls: type[_Machine],
        trial_id: str,
        policy: TrialPolicy,
        *,
        state: TrialState,
        checkpoints: list[Checkpoint],
        num_failures: int,
        iteration: int,
        error: BaseException | None,
        origin: Checkpoint | None = None,
    ) -> _Machine:
        """A machine as a journal left it, for a driver that resumes the experiment:
        TERMINATED, ERROR and PAUSED trials keep their state; any other is PENDING (it
        starts again from its timeline's newest checkpoint)."""
        machine = cls(trial_id, policy)
        machine.checkpoints = list(checkpoints)
        machine.origin = origin
        machine.num_failures = num_failures
        machine.iteration = iteration
        machine.error = error
        if error is not None:
            machine.errors.append(error)
        machine.state = state if state.is_settled else TrialState.PENDING
        return machine

    @property
    def pinned(self) -> frozenset[str]:
        """Checkpoint keys that must not be deleted, whoever owns them: they are about
        to be restored, or this trial's timeline starts from them."""
        keys = set(self._restoring)
        if self.origin is not None:
            keys.add(self.origin.key)
        return frozenset(keys)

    @property
    def _restoring(self) -> frozenset[str]:
        return frozenset(
            ckpt.key for ckpt in (self.restore_target, self.intent_checkpoint) if ckpt is not None
        )

    @property
    def pausing(self) -> bool:
        return self.intent is Intent.PAUSE

    @property
    def timeline(self) -> list[Checkpoint]:
        """The checkpoints the current run descends from, oldest first: the origin (when
        the timeline starts from another trial's checkpoint), then its own."""
        return ([self.origin] if self.origin is not None else []) + self.checkpoints

    @property
    def latest_checkpoint(self) -> Checkpoint | None:
        """The newest loadable checkpoint on the timeline: what a failure restores."""
        for ckpt in reversed(self.checkpoints):  # asked for at every result (schedulers)
            if ckpt.key not in self.bad_checkpoints:
                return ckpt
        origin = self.origin
        return origin if origin is not None and origin.key not in self.bad_checkpoints else None

    def keeps(self, key: str) -> bool:
        """Whether ``key`` is on this trial's timeline."""
        return any(c.key == key for c in self.timeline)

    def _start_timeline(self, start: Checkpoint | None) -> list[Action]:
        """A run started from ``start`` (``None``: from scratch). The timeline is now what
        led to ``start``: its own checkpoints up to it when it is one of them, else
        ``start`` alone as the origin. Its own checkpoints that are not on it (newer
        than ``start``, or from before an exploit) are deleted; an origin it no longer
        needs is let go (deleted only if its owner does not keep it)."""
        keys = [c.key for c in self.checkpoints]
        actions: list[Action] = []
        if start is not None and start.key in keys:
            cut = keys.index(start.key) + 1
            abandoned, self.checkpoints = self.checkpoints[cut:], self.checkpoints[:cut]
        else:
            abandoned, self.checkpoints = self.checkpoints, []
            old = self.origin
            if start is None or old is None or old.key != start.key:
                self.origin = start
                if old is not None:
                    actions.append(ReleaseCheckpoint(old))
        if abandoned:
            why = (
                f"the trial restarted from iteration "
                f"{start.iteration if start is not None else 0} after it was saved, so it "
                "belongs to an abandoned run and is deleted"
            )
            self.dropped.update((c.key, why) for c in abandoned)
            actions.insert(0, DeleteCheckpoints(tuple(abandoned)))
        return actions

    def _retain(self) -> list[Action]:
        """Retention over the whole timeline: its own checkpoints it does not keep are
        deleted; an origin it does not keep is let go."""
        doomed = self.policy.retention.plan_deletions(self.timeline, self._restoring)
        if not doomed:
            return []
        actions: list[Action] = []
        gone = {c.key for c in doomed}
        if self.origin is not None and self.origin.key in gone:
            actions.append(ReleaseCheckpoint(self.origin))
            self.origin = None
        own = tuple(c for c in self.checkpoints if c.key in gone)
        if own:
            self.checkpoints = [c for c in self.checkpoints if c.key not in gone]
            why = f"retention deleted it (keep_checkpoints={self.policy.retention.keep})"
            self.dropped.update((c.key, why) for c in own)
            actions.insert(0, DeleteCheckpoints(own))
        return actions

    def _start_actor(self, target: Checkpoint | None, delay: float = 0.0) -> list[Action]:
        self.generation += 1
        self.state = TrialState.STARTING
        self._clear_actor_work()
        self.restore_target = target
        return [StartActor(self.generation, delay)]

    def _clear_actor_work(self) -> None:
        self.train_in_flight = False
        self.saves_in_flight = 0
        self.intent = None
        self.intent_checkpoint = None
        self.intent_config = None
        self.held = False
        self.waiting_for_hooks = False
        self.grace_armed = self.grace_extended = False
        self.restore_target = None
        self.restore_config = None

    def _release(self, state: TrialState) -> list[Action]:
        actions: list[Action] = []
        if self.state.has_actor:
            actions.append(StopActor(self.generation))
        self.state = state
        self._clear_actor_work()
        if state is TrialState.TERMINATED:
            actions.append(Notify("on_trial_complete"))
        return actions

    def _want(
        self,
        intent: Intent,
        checkpoint: Checkpoint | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        if intent is Intent.RESTORE:
            # A restore request replaces a pending restore, but never a stop or pause.
            if self.intent in (None, Intent.RESTORE):
                self.intent, self.intent_checkpoint, self.intent_config = intent, checkpoint, config
        elif self.intent is None or intent.value > self.intent.value:
            self.intent, self.intent_checkpoint, self.intent_config = intent, None, None

    def hooks_restarted(self) -> None:
        """A new hook runner watches the trial (the experiment was entered again): what
        an earlier one had not shown is gone, so nothing is owed to it."""
        self.results_hooked = self.reported_at_call = self.results_reported

    def _arm_grace(self, seconds: float | None = None) -> list[Action]:
        """Give the call in flight a grace period, once per stop or pause."""
        if self.grace_armed and seconds is None:
            return []
        self.grace_armed = True
        self.grace_token += 1
        if seconds is None:
            seconds = max(self.policy.stop_grace_s, 2 * self.longest_step_s)
        return [ArmGrace(self.generation, self.grace_token, seconds)]

    def _disarm_grace(self) -> None:
        self.grace_armed = self.grace_extended = False
        self.grace_token += 1

    def _behind_hooks(self) -> bool:
        """The trial's result hooks have not yet seen every result reported before its
        newest train call: the next call waits for them."""
        seen = self.policy.hooks_seen
        if seen is None:
            return False
        if self.results_hooked < self.reported_at_call:
            self.results_hooked = max(self.results_hooked, seen())
        return self.results_hooked < self.reported_at_call

    def _save(self) -> list[Action]:
        self.saves_in_flight += 1
        self.saved_iteration = self.iteration
        return [Save(self.generation, self.iteration)]

    def _needs_final_save(self) -> bool:
        if self.saved_iteration == self.iteration or self.iteration == 0 or self.storage_down:
            return False
        if not self.policy.saves_on_demand:
            return False
        if self.intent is Intent.PAUSE:
            return True
        return self.intent in (Intent.FINISH, Intent.STOP) and self.policy.checkpoint_every > 0

    def _expect_save(self, event: Event) -> None:
        if self.saves_in_flight <= 0:
            raise InvalidTransition(
                f"trial {self.trial_id}: {type(event).__name__} but no save was asked for"
            )

    def _revive(self) -> None:
        """The user brings the trial back: a fresh failure budget, the old error gone."""
        self.error = None
        self.failures_counted = 0
        self.consecutive_failures = 0
        self.storage_down = False

    def _fail_at_once(self, error: TrialError) -> list[Action]:
        """ERROR now, without a retry: retrying cannot fix this one."""
        self.num_failures += 1
        self.error = error
        self.errors.append(error)
        actions: list[Action] = [
            StopActor(self.generation, graceful=False),
            Notify("on_trial_error", (error,)),
        ]
        self.state = TrialState.ERROR
        self._clear_actor_work()
        return actions
