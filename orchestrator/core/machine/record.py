"""A trial's record: what ran, what is in flight, what is wanted, its timeline of
checkpoints; with the one method that changes its state (:meth:`TrialRecord._move`,
checked against the table's targets for the input being handled) and the moves that
keep the timeline consistent.

Nothing here decides which move happens on which input: that is the table's business
(:mod:`orchestrator.core.machine.table`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from orchestrator.core.checkpoints import Checkpoint
from orchestrator.core.decisions import Decision
from orchestrator.core.events import Action, DeleteCheckpoints, ReleaseCheckpoint
from orchestrator.core.machine.states import Intent, TrialPolicy, TrialState
from orchestrator.errors import InvalidTransition

__all__ = ["TrialRecord", "UndeclaredMove"]

_Record = TypeVar("_Record", bound="TrialRecord")

_NOWHERE: frozenset[TrialState] = frozenset()
#: One empty set for every record: ``frozenset()`` is a new object per call (issue 36).
_NO_KEYS: frozenset[str] = frozenset()


class UndeclaredMove(InvalidTransition):
    """A handler tried to move the trial to a state its table entry does not list: a
    bug in the machine (the table or the handler), never in its caller. Nothing changed."""


class TrialRecord:
    """One trial's record and the moves that keep it consistent.

    ``state`` changes only through :meth:`_move`, while an input is handled; every
    container is replaced rather than changed in place (except ``dropped``, which only
    grows), so a snapshot of the attributes taken before an input is enough to undo
    everything it did when it turns out to be illegal (see ``TrialMachine.handle``).
    """

    # Slots, not a __dict__: a finished trial's record stays in the driver for the whole
    # experiment (issue 36: ~1.5 KiB a trial as a dict of this many fields), and a
    # snapshot per input is a tuple of them.
    __slots__ = (
        "trial_id",
        "policy",
        "_state",
        "_may_move_to",
        "_then",
        "generation",
        "iteration",
        "checkpoints",
        "origin",
        "dropped",
        "num_failures",
        "failures_counted",
        "consecutive_failures",
        "error",
        "errors",
        "metrics_checked",
        "last_metrics",
        "last_step_s",
        "longest_step_s",
        "train_in_flight",
        "saves_in_flight",
        "saved_iteration",
        "intent",
        "intent_checkpoint",
        "intent_config",
        "held",
        "results_reported",
        "results_hooked",
        "reported_at_call",
        "waiting_for_hooks",
        "grace_armed",
        "grace_extended",
        "save_wanted",
        "grace_token",
        "restore_target",
        "restore_config",
        "bad_checkpoints",
        "storage_down",
    )

    def __init__(self, trial_id: str, policy: TrialPolicy | None = None) -> None:
        self.trial_id = trial_id
        self.policy = policy or TrialPolicy()
        self._state = TrialState.PENDING
        self._may_move_to = _NOWHERE  # the targets of the input being handled
        self._then: Decision | None = None  # a judge's decision, carried out next
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
        self.held = False  # a Hold decision: no step until a later decision
        # Results reported, results its result hooks have processed (both counted from
        # this machine's start), the first count when the newest train call was asked
        # for, and whether training waits for the hooks (see TrialPolicy.hook_progress).
        self.results_reported = 0
        self.results_hooked = 0
        self.reported_at_call = 0
        self.waiting_for_hooks = False
        # The stop or pause waiting for a call in flight has a grace period (ArmGrace);
        # the token tells its expiry from an earlier one's.
        self.grace_armed = False
        self.grace_extended = False  # saves in flight got their extra time
        self.save_wanted = False  # SaveRequested: save after the next result
        self.grace_token = 0
        # What a starting actor restores once it is ready (None: a fresh start), and
        # with which new config (None: the one it was set up with).
        self.restore_target: Checkpoint | None = None
        self.restore_config: Mapping[str, Any] | None = None
        self.bad_checkpoints: frozenset[str] = _NO_KEYS
        self.storage_down = False  # a save could not be persisted: no final save either

    @classmethod
    def resumed(
        cls: type[_Record],
        trial_id: str,
        policy: TrialPolicy,
        *,
        state: TrialState,
        checkpoints: list[Checkpoint],
        num_failures: int,
        iteration: int,
        error: BaseException | None,
        origin: Checkpoint | None = None,
    ) -> _Record:
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
            machine.errors = [error]
        machine._state = state if state.is_settled else TrialState.PENDING
        return machine

    def rebuilt(self: _Record, policy: TrialPolicy) -> _Record:
        """The same trial, with the same record, run with ``policy`` from now on: a
        resumed sweep's journaled trial gets its scheduler's judge this way when the
        sweep's call claims it. The policies themselves never change."""
        machine = type(self).__new__(type(self))
        for name in TrialRecord.__slots__:
            setattr(machine, name, getattr(self, name))
        machine.policy = policy
        return machine

    # -- the state, and the one way to change it ---------------------------------------

    @property
    def state(self) -> TrialState:
        return self._state

    def _move(self, target: TrialState) -> None:
        """Enter ``target``, which the table must list for the input being handled."""
        if target not in self._may_move_to:
            raise UndeclaredMove(
                f"trial {self.trial_id}: may not move from {self._state.value} to "
                f"{target.value} on this input (the table lists "
                f"{sorted(s.value for s in self._may_move_to) or 'no move'})"
            )
        self._state = target

    def _snapshot(self) -> tuple[tuple[Any, ...], int]:
        return tuple(getattr(self, name) for name in TrialRecord.__slots__), len(self.dropped)

    def _rollback(self, snapshot: tuple[tuple[Any, ...], int]) -> None:
        """Undo everything since :meth:`_snapshot` (see the class docstring)."""
        saved, dropped = snapshot
        grown = saved[TrialRecord.__slots__.index("dropped")]
        for key in list(grown)[dropped:]:
            del grown[key]
        for name, value in zip(TrialRecord.__slots__, saved, strict=True):
            setattr(self, name, value)

    # -- what it holds -----------------------------------------------------------------

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

    def hooks_restarted(self) -> None:
        """A new hook runner watches the trial (the experiment was entered again): what
        an earlier one had not shown is gone, so nothing is owed to it."""
        self.results_hooked = self.reported_at_call = self.results_reported

    # -- the timeline ------------------------------------------------------------------

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

    def _persisted(self, ckpt: Checkpoint) -> list[Action]:
        """``ckpt`` joins the timeline; retention then runs over the whole timeline:
        its own checkpoints it does not keep are deleted; an origin it does not keep is
        let go."""
        self.checkpoints = sorted([*self.checkpoints, ckpt], key=lambda c: c.iteration)
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

    def _mark_bad(self, key: str) -> None:
        self.bad_checkpoints = self.bad_checkpoints | {key}

    def _record_error(self, error: BaseException) -> None:
        self.error = error
        self.errors = [*self.errors, error]
