"""The trial lifecycle: a sans-IO state machine.

Everything that decides what happens to a trial lives in this file: its states, the
events that move it, the actions each move asks for, and the one table of legal
transitions. It imports neither Ray nor asyncio, so it is tested exhaustively on its
own; the loop (``loop.py``) feeds it events and executes the actions it returns.

Theory of operation
-------------------
A trial has one :class:`TrialState`. Work on its actor (start, train, save, restore)
is asked for by actions and comes back as events. Every actor is given a
*generation* number; an event from an older generation (the actor was replaced after
a failure, or killed on pause) is stale and silently dropped, which is what makes late
results from dead actors harmless.

While RUNNING, exactly one train step is in flight unless an *intent* is pending: the
trial reached its stop condition (FINISH), or the user asked to STOP, PAUSE or
RESTORE. An intent stops further training; once nothing is in flight (the last step
returned and every pipelined save is persisted) the machine *settles* it. A save does
not block training: it is asked for together with the next train step. But a trial
trains ahead of at most ``max_pending_saves`` unpersisted checkpoints: past that, the
next step waits for a save to be persisted, so scratch space and upload queues stay
bounded when storage is slower than training.

Failures (the trainable raised, its actor or node died) all take one path: the actor is
dropped and, within ``max_failures``, a new one is started and restored from the
newest persisted checkpoint (or started fresh when there is none); past the budget the
trial goes to ERROR, keeping the cause.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .checkpoints import Checkpoint, RetentionPolicy
from .errors import InvalidTransition, TrialError


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


# --------------------------------------------------------------------------- events


@dataclass(frozen=True)
class Event:
    """Base of every event."""


@dataclass(frozen=True)
class ActorEvent(Event):
    """An event that comes back from the trial's actor of one ``generation``."""

    generation: int


@dataclass(frozen=True)
class Launch(Event):
    """The orchestrator starts a PENDING trial."""


@dataclass(frozen=True)
class ActorReady(ActorEvent):
    """The actor exists and the trainable's ``setup`` returned."""


@dataclass(frozen=True)
class TrainResult(ActorEvent):
    """A train call returned the metrics of one or more steps, oldest first.

    The machine numbers them: each reported result gets ``training_iteration`` and
    ``trial_id``.
    """

    results: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class SaveDone(ActorEvent):
    """A checkpoint was written *and persisted* (its manifest is committed)."""

    checkpoint: Checkpoint


@dataclass(frozen=True)
class SaveFailed(ActorEvent):
    """Storage stayed unreachable past the retry limit: the checkpoint was not persisted.

    Not a trial failure (the trainable is fine), but training on without a way to
    persist would risk losing ever more work, so the trial pauses with this error.
    """

    iteration: int
    error: BaseException


@dataclass(frozen=True)
class CheckpointUnavailable(ActorEvent):
    """``checkpoint`` cannot reach the trial's actor (its node-local copy is on a node
    that died, say). The actor is fine: try the next older checkpoint with it."""

    checkpoint: Checkpoint
    error: BaseException


@dataclass(frozen=True)
class RestoreDone(ActorEvent):
    """The trainable loaded ``checkpoint`` (``None``: it was started fresh)."""

    checkpoint: Checkpoint | None


@dataclass(frozen=True)
class Failure(ActorEvent):
    """Work on the actor failed. ``actor_died`` tells a lost actor from a raised error;
    ``permanent``: retrying cannot help (the trainable cannot even be imported where the
    actor runs), so the trial goes to ERROR at once, whatever its failure budget."""

    error: BaseException
    actor_died: bool = False
    permanent: bool = False


@dataclass(frozen=True)
class StopRequested(Event):
    """The user (or a hook) asked the trial to end now."""


@dataclass(frozen=True)
class PauseRequested(Event):
    """Save, then free the trial's resources; it can be resumed later."""


@dataclass(frozen=True)
class ResumeRequested(Event):
    """Continue a PAUSED trial from its newest checkpoint."""


@dataclass(frozen=True)
class RestoreRequested(Event):
    """Roll the trial back (or bring it back) to ``checkpoint`` and continue from it."""

    checkpoint: Checkpoint


# -------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Action:
    """Base of every action the loop must carry out."""


@dataclass(frozen=True)
class StartActor(Action):
    """Create the trial's actor (generation ``generation``) and run ``setup``.

    ``delay`` seconds to wait first (back-off after a failure).
    """

    generation: int
    delay: float = 0.0


@dataclass(frozen=True)
class Train(Action):
    """Run up to ``steps`` training steps in one call (more than 1 only when buffering)."""

    generation: int
    steps: int = 1


@dataclass(frozen=True)
class Save(Action):
    """Save the trainable's state after ``iteration`` and persist it."""

    generation: int
    iteration: int


@dataclass(frozen=True)
class Restore(Action):
    """Load ``checkpoint`` into the trainable (``None``: nothing to load; fresh start)."""

    generation: int
    checkpoint: Checkpoint | None


@dataclass(frozen=True)
class StopActor(Action):
    """Release the actor of ``generation``: ``graceful`` lets it clean up first."""

    generation: int
    graceful: bool = True


@dataclass(frozen=True)
class Report(Action):
    """Record a result (``training_iteration`` already set) and run ``on_trial_result``."""

    result: Mapping[str, Any]


@dataclass(frozen=True)
class Rollback(Action):
    """Drop recorded results after ``iteration``: they belong to an abandoned timeline."""

    iteration: int


@dataclass(frozen=True)
class RecordCheckpoint(Action):
    checkpoint: Checkpoint


@dataclass(frozen=True)
class DeleteCheckpoints(Action):
    """Garbage-collect these persisted checkpoints (off the loop's critical path)."""

    checkpoints: tuple[Checkpoint, ...]


@dataclass(frozen=True)
class Notify(Action):
    """Run the hook ``name`` (``on_trial_start``, ``on_trial_error``...) with ``args``."""

    hook: str
    args: tuple[Any, ...] = ()


# -------------------------------------------------------------------------- machine


@dataclass
class TrialPolicy:
    """The per-trial knobs the machine decides with (validated by the public API)."""

    checkpoint_every: int = 0
    max_failures: int = 0  # -1: no limit
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)
    should_stop: Callable[[Mapping[str, Any]], bool] = lambda result: False
    backoff_base: float = 0.0
    backoff_max: float = 30.0
    fallback_to_scratch: bool = False  # when no checkpoint can be loaded, start over
    steps_per_call: int = 1  # > 1: the actor may run ahead, never past a save or a stop
    iteration_limit: int | None = None  # a training_iteration stop threshold, if any
    max_pending_saves: int = 2  # unpersisted checkpoints a trial may train ahead of
    # Metrics the trial's first result must report (the stop criterion's keys): a name
    # that is not there is an error at once, not a trial that never stops.
    required_metrics: tuple[str, ...] = ()


Handler = Callable[["TrialMachine", Any], list[Action]]


class TrialMachine:
    """One trial's state, and the only code that changes it.

    ``handle(event)`` returns the actions to carry out, in order. An event the current
    state does not accept raises :class:`InvalidTransition` and changes nothing.
    """

    def __init__(self, trial_id: str, policy: TrialPolicy | None = None) -> None:
        self.trial_id = trial_id
        self.policy = policy or TrialPolicy()
        self.state = TrialState.PENDING
        self.generation = 0
        self.iteration = 0
        self.checkpoints: list[Checkpoint] = []
        self.num_failures = 0  # every failure, for the record
        self.failures_counted = 0  # against max_failures; reset when the user revives it
        self.consecutive_failures = 0  # for back-off; reset by the next result
        self.error: BaseException | None = None  # the last failure, until it recovers
        self.errors: list[BaseException] = []  # every failure, oldest first
        self.metrics_checked = False
        self.last_metrics: Mapping[str, Any] | None = None
        # Work in flight on the current actor.
        self.train_in_flight = False
        self.saves_in_flight = 0
        self.saved_iteration = -1  # the last iteration a save was asked for
        self.intent: Intent | None = None
        self.intent_checkpoint: Checkpoint | None = None
        # What a starting actor restores once it is ready (None: a fresh start).
        self.restore_target: Checkpoint | None = None
        self.bad_checkpoints: set[str] = set()
        self.storage_down = False  # a save could not be persisted: no final save either

    # -- public ------------------------------------------------------------------

    @property
    def pinned(self) -> frozenset[str]:
        """Checkpoint keys that must not be deleted: they are about to be restored."""
        keys = set()
        for ckpt in (self.restore_target, self.intent_checkpoint):
            if ckpt is not None:
                keys.add(ckpt.key)
        return frozenset(keys)

    @property
    def pausing(self) -> bool:
        return self.intent is Intent.PAUSE

    @property
    def latest_checkpoint(self) -> Checkpoint | None:
        usable = [c for c in self.checkpoints if c.key not in self.bad_checkpoints]
        return usable[-1] if usable else None

    def handle(self, event: Event) -> list[Action]:
        if isinstance(event, ActorEvent) and (
            event.generation != self.generation or not self.state.has_actor
        ):
            return []  # stale: from an actor that has been replaced or released
        handler = _TRANSITIONS.get(self.state, {}).get(type(event))
        if handler is None:
            raise InvalidTransition(
                f"trial {self.trial_id}: event {type(event).__name__} is not accepted "
                f"in state {self.state.value}"
            )
        return handler(self, event)

    def accepts(self, event_type: type[Event]) -> bool:
        return event_type in _TRANSITIONS.get(self.state, {})

    # -- helpers -------------------------------------------------------------------

    def _start_actor(self, target: Checkpoint | None, delay: float = 0.0) -> list[Action]:
        self.generation += 1
        self.state = TrialState.STARTING
        self.train_in_flight = False
        self.saves_in_flight = 0
        self.intent = None
        self.intent_checkpoint = None
        self.restore_target = target
        return [StartActor(self.generation, delay)]

    def _release(self, state: TrialState) -> list[Action]:
        actions: list[Action] = []
        if self.state.has_actor:
            actions.append(StopActor(self.generation))
        self.state = state
        self.train_in_flight = False
        self.saves_in_flight = 0
        self.intent = None
        self.intent_checkpoint = None
        self.restore_target = None
        if state is TrialState.TERMINATED:
            actions.append(Notify("on_trial_complete"))
        return actions

    def _want(self, intent: Intent, checkpoint: Checkpoint | None = None) -> None:
        if intent is Intent.RESTORE:
            # A restore request replaces a pending restore, but never a stop or pause.
            if self.intent in (None, Intent.RESTORE):
                self.intent, self.intent_checkpoint = intent, checkpoint
        elif self.intent is None or intent.value > self.intent.value:
            self.intent, self.intent_checkpoint = intent, None

    def _save(self) -> list[Action]:
        self.saves_in_flight += 1
        self.saved_iteration = self.iteration
        return [Save(self.generation, self.iteration)]

    def _needs_final_save(self) -> bool:
        if self.saved_iteration == self.iteration or self.iteration == 0 or self.storage_down:
            return False
        if self.intent is Intent.PAUSE:
            return True
        return self.intent in (Intent.FINISH, Intent.STOP) and self.policy.checkpoint_every > 0

    def _settle_if_idle(self) -> list[Action]:
        """Carry out the pending intent once nothing is in flight."""
        if self.train_in_flight or self.saves_in_flight:
            return []
        intent, target = self.intent, self.intent_checkpoint
        if intent in (Intent.FINISH, Intent.STOP):
            return self._release(TrialState.TERMINATED)
        if intent is Intent.PAUSE:
            return self._release(TrialState.PAUSED)
        if intent is Intent.RESTORE:
            self.intent, self.intent_checkpoint = None, None
            self.restore_target = target
            self.state = TrialState.RESTORING
            return [Restore(self.generation, target)]
        return self._train()

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

    def _train(self) -> list[Action]:
        self.train_in_flight = True
        steps = self.policy.steps_per_call
        if steps > 1:
            every = self.policy.checkpoint_every
            if every > 0:
                steps = min(steps, every - self.iteration % every)
            if self.policy.iteration_limit is not None:
                steps = min(steps, max(1, self.policy.iteration_limit - self.iteration))
        return [Train(self.generation, steps)]

    def _train_unless_saves_lag(self) -> list[Action]:
        """The next step, unless too many saves are still being persisted: then
        ``SaveDone`` asks for it once one is."""
        if self.saves_in_flight > self.policy.max_pending_saves:
            return []
        return self._train()

    def _backoff(self) -> float:
        base = self.policy.backoff_base
        if base <= 0:
            return 0.0
        return float(min(self.policy.backoff_max, base * 2 ** (self.consecutive_failures - 1)))

    # -- handlers ------------------------------------------------------------------

    def _on_launch(self, event: Launch) -> list[Action]:
        # A new trial has no checkpoint; one resumed after a driver restart has.
        return self._start_actor(self.latest_checkpoint) + [Notify("on_trial_start")]

    def _on_actor_ready(self, event: ActorReady) -> list[Action]:
        if self.restore_target is not None:
            self.state = TrialState.RESTORING
            return [Restore(self.generation, self.restore_target)]
        return self._begin_running(None)

    def _on_restore_done(self, event: RestoreDone) -> list[Action]:
        return self._begin_running(event.checkpoint)

    def _begin_running(self, ckpt: Checkpoint | None) -> list[Action]:
        """The trainable holds ``ckpt``'s state (``None``: fresh): continue from there."""
        self.iteration = ckpt.iteration if ckpt is not None else 0
        self.saved_iteration = self.iteration if ckpt is not None else -1
        self.restore_target = None
        self.state = TrialState.RUNNING
        actions: list[Action] = [Rollback(self.iteration)]
        if ckpt is not None:
            actions.append(Notify("on_trial_restore", (ckpt,)))
        if self.intent is not None:
            return actions + self._settle_if_idle()
        return actions + self._train()

    def _on_train_result(self, event: TrainResult) -> list[Action]:
        self.train_in_flight = False
        self.consecutive_failures = 0
        if not self.storage_down:
            self.error = None  # it recovered: the history stays in ``errors``
        actions: list[Action] = []
        for metrics in event.results:
            self.iteration += 1
            result = {**metrics, "training_iteration": self.iteration, "trial_id": self.trial_id}
            self.last_metrics = result
            actions.append(Report(result))
            if not self.metrics_checked:
                self.metrics_checked = True
                missing = [k for k in self.policy.required_metrics if k not in result]
                if missing:
                    return actions + self._fail_at_once(_missing_metrics(self, missing, result))
            if self.policy.should_stop(result):
                self._want(Intent.FINISH)
        every = self.policy.checkpoint_every
        due = every > 0 and self.iteration % every == 0
        if self.intent is None:
            if due:
                actions += self._save()
            return actions + self._train_unless_saves_lag()
        if due or self._needs_final_save():
            actions += self._save()
        return actions + self._settle_if_idle()

    def _on_save_done(self, event: SaveDone) -> list[Action]:
        self._expect_save(event)
        self.saves_in_flight -= 1
        self.checkpoints.append(event.checkpoint)
        self.checkpoints.sort(key=lambda c: c.iteration)
        actions: list[Action] = [
            RecordCheckpoint(event.checkpoint),
            Notify("on_checkpoint", (event.checkpoint,)),
        ]
        doomed = self.policy.retention.plan_deletions(self.checkpoints, self.pinned)
        if doomed:
            gone = {c.key for c in doomed}
            self.checkpoints = [c for c in self.checkpoints if c.key not in gone]
            actions.append(DeleteCheckpoints(tuple(doomed)))
        if self.intent is not None:
            actions += self._settle_if_idle()
        elif not self.train_in_flight:
            # Training waited for this save (or an intent was withdrawn while it was in
            # flight, e.g. a resume cancelling a pause): go on.
            actions += self._train_unless_saves_lag()
        return actions

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
        self.train_in_flight = False
        self.saves_in_flight = 0
        self.intent = None
        self.intent_checkpoint = None
        self.restore_target = None
        return actions

    def _on_failure(self, event: Failure) -> list[Action]:
        if event.permanent:
            error = event.error
            if not isinstance(error, TrialError):
                error = TrialError(self.trial_id, str(error), error)
            return self._fail_at_once(error)
        load_failed = self.state is TrialState.RESTORING and not event.actor_died
        if load_failed and self.restore_target is not None:
            # The trainable could not load this checkpoint: fall back to an older one.
            self.bad_checkpoints.add(self.restore_target.key)
        self.num_failures += 1
        self.consecutive_failures += 1
        fallback = self.latest_checkpoint
        if not (load_failed and fallback is not None):
            self.failures_counted += 1  # a usable older checkpoint costs no budget
        self.error = event.error
        self.errors.append(event.error)
        intent, wanted = self.intent, self.intent_checkpoint
        actions: list[Action] = [
            StopActor(self.generation, graceful=False),
            Notify("on_trial_error", (event.error,)),
        ]
        self.state = TrialState.PENDING  # no actor any more; decided below
        if intent is Intent.STOP:
            return actions + self._release(TrialState.TERMINATED)
        if intent is Intent.PAUSE:
            return actions + self._release(TrialState.PAUSED)
        if (
            intent is Intent.RESTORE
            and wanted is not None
            and wanted.key not in self.bad_checkpoints
        ):
            target: Checkpoint | None = wanted
        else:
            target = fallback
        if target is None and self.bad_checkpoints and not self.policy.fallback_to_scratch:
            self.error = TrialError(
                self.trial_id,
                f"none of its checkpoints could be loaded ({len(self.bad_checkpoints)} "
                f"tried; last error: {event.error}); pass fallback_to_scratch=True to let "
                "it start over from scratch",
                event.error,
            )
            self.state = TrialState.ERROR
            return actions
        budget = self.policy.max_failures
        if budget >= 0 and self.failures_counted > budget:
            self.state = TrialState.ERROR
            return actions
        return actions + self._start_actor(target, self._backoff())

    def _on_checkpoint_unavailable(self, event: CheckpointUnavailable) -> list[Action]:
        self.bad_checkpoints.add(event.checkpoint.key)
        target = self.latest_checkpoint
        if target is not None:
            self.restore_target = target
            return [Restore(self.generation, target)]
        if self.policy.fallback_to_scratch:
            return self._begin_running(None)
        self.error = TrialError(
            self.trial_id,
            f"no checkpoint can reach its new actor (last: {event.error}); their files "
            "are gone, or only on disks no live node can read: pass "
            "fallback_to_scratch=True to let it start over",
            event.error,
        )
        self.errors.append(self.error)
        actions: list[Action] = [
            StopActor(self.generation, graceful=False),
            Notify("on_trial_error", (self.error,)),
        ]
        self.state = TrialState.ERROR
        self.restore_target = None
        return actions

    def _on_save_failed(self, event: SaveFailed) -> list[Action]:
        self._expect_save(event)
        self.saves_in_flight -= 1
        self.storage_down = True
        self.error = event.error
        self.errors.append(event.error)
        self._want(Intent.PAUSE)
        return [Notify("on_trial_error", (event.error,))] + self._settle_if_idle()

    def _on_stop(self, event: StopRequested) -> list[Action]:
        if self.state is TrialState.RUNNING or self.state is TrialState.RESTORING:
            self._want(Intent.STOP)
            if self.state is TrialState.RESTORING:
                return []
            if self.train_in_flight:
                return []  # the step's result will save (a save now would run after it)
            if self._needs_final_save():
                return self._save()
            return self._settle_if_idle()
        return self._release(TrialState.TERMINATED)

    def _on_pause(self, event: PauseRequested) -> list[Action]:
        if self.state is TrialState.RUNNING or self.state is TrialState.RESTORING:
            self._want(Intent.PAUSE)
            if self.state is TrialState.RESTORING:
                return []
            if self.train_in_flight:
                return []  # the step's result will save (a save now would run after it)
            if self._needs_final_save():
                return self._save()
            return self._settle_if_idle()
        return self._release(TrialState.PAUSED)

    def _on_resume(self, event: ResumeRequested) -> list[Action]:
        self._revive()
        return self._start_actor(self.latest_checkpoint)

    def _on_resume_active(self, event: ResumeRequested) -> list[Action]:
        """Resuming a trial that is still pausing cancels the pause."""
        if self.intent is Intent.PAUSE:
            self.intent = None
            if self.state is TrialState.RUNNING:
                return self._settle_if_idle()
        return []

    def _on_restore_request(self, event: RestoreRequested) -> list[Action]:
        if self.state is TrialState.RUNNING:
            self._want(Intent.RESTORE, event.checkpoint)
            return self._settle_if_idle()
        if self.state is TrialState.RESTORING:
            self._want(Intent.RESTORE, event.checkpoint)
            return []
        if self.state is TrialState.STARTING:
            self.restore_target = event.checkpoint
            return []
        # PENDING, PAUSED, TERMINATED, ERROR: bring it (back) to life at that checkpoint.
        self._revive()
        self.bad_checkpoints.discard(event.checkpoint.key)
        return self._start_actor(event.checkpoint)

    def _ignore(self, event: Event) -> list[Action]:
        return []


def _missing_metrics(
    machine: TrialMachine, missing: list[str], result: Mapping[str, Any]
) -> TrialError:
    names = ", ".join(repr(k) for k in missing)
    reported = ", ".join(repr(k) for k in result)
    return TrialError(
        machine.trial_id,
        f"its stop criterion uses {names}, which its first result does not report "
        f"(it reported {reported}); fix the metric's name, or pass strict_metrics=False "
        "if it first appears in later results",
    )


_ACTOR_EVENTS: dict[type[Event], Handler] = {Failure: TrialMachine._on_failure}
_REQUESTS: dict[type[Event], Handler] = {
    StopRequested: TrialMachine._on_stop,
    PauseRequested: TrialMachine._on_pause,
    RestoreRequested: TrialMachine._on_restore_request,
}

#: Every legal (state, event) pair and its handler. Anything else is InvalidTransition.
_TRANSITIONS: dict[TrialState, dict[type[Event], Handler]] = {
    TrialState.PENDING: {
        Launch: TrialMachine._on_launch,
        ResumeRequested: TrialMachine._ignore,
        **_REQUESTS,
    },
    TrialState.STARTING: {
        ActorReady: TrialMachine._on_actor_ready,
        ResumeRequested: TrialMachine._on_resume_active,
        **_ACTOR_EVENTS,
        **_REQUESTS,
    },
    TrialState.RESTORING: {
        RestoreDone: TrialMachine._on_restore_done,
        CheckpointUnavailable: TrialMachine._on_checkpoint_unavailable,
        ResumeRequested: TrialMachine._on_resume_active,
        **_ACTOR_EVENTS,
        **_REQUESTS,
    },
    TrialState.RUNNING: {
        TrainResult: TrialMachine._on_train_result,
        SaveDone: TrialMachine._on_save_done,
        SaveFailed: TrialMachine._on_save_failed,
        ResumeRequested: TrialMachine._on_resume_active,
        **_ACTOR_EVENTS,
        **_REQUESTS,
    },
    TrialState.PAUSED: {
        ResumeRequested: TrialMachine._on_resume,
        PauseRequested: TrialMachine._ignore,
        StopRequested: TrialMachine._on_stop,
        RestoreRequested: TrialMachine._on_restore_request,
    },
    TrialState.TERMINATED: {
        StopRequested: TrialMachine._ignore,
        PauseRequested: TrialMachine._ignore,
        ResumeRequested: TrialMachine._ignore,
        RestoreRequested: TrialMachine._on_restore_request,
    },
    TrialState.ERROR: {
        StopRequested: TrialMachine._ignore,
        PauseRequested: TrialMachine._ignore,
        ResumeRequested: TrialMachine._on_resume,
        RestoreRequested: TrialMachine._on_restore_request,
    },
}

ALL_EVENT_TYPES: tuple[type[Event], ...] = (
    Launch,
    ActorReady,
    TrainResult,
    SaveDone,
    SaveFailed,
    RestoreDone,
    CheckpointUnavailable,
    Failure,
    StopRequested,
    PauseRequested,
    ResumeRequested,
    RestoreRequested,
)
