"""The trial lifecycle: a sans-IO state machine.

Everything that decides what happens to a trial lives in this file: the one table of
legal transitions, and the handlers that turn each event into the actions the loop must
carry out (the events and actions themselves are small dataclasses in
:mod:`orchestrator.core.events`; the trial's states, policy and record, with the small moves
that change the record, are in :mod:`orchestrator.core.machine_state`). It imports neither Ray
nor asyncio, so it is tested exhaustively on its own; the loop (``loop.py``) feeds it
events and executes the actions it returns.

Theory of operation
-------------------
A trial has one :class:`TrialState`. Work on its actor (start, train, save, restore)
is asked for by actions and comes back as events. Every actor is given a
*generation* number; an event from an older generation (the actor was replaced after
a failure, or killed on pause) is stale and silently dropped, which is what makes late
results from dead actors harmless.

While RUNNING, exactly one train step is in flight unless an *intent* is pending: the
trial's judge decided it must end or pause (FINISH, PAUSE, or a RESTORE for an exploit),
or the user asked to STOP, PAUSE or RESTORE. An intent stops further training; once
nothing is in flight (the last step returned and every pipelined save is persisted)
the machine *settles* it. The judge (:mod:`orchestrator.core.judge`: the stop criterion, a
scheduler) sees every result before the next step is asked for, and caps how many steps
a buffered call may run, so decisions are exact; it may also *hold* the trial (keep its
actor, train no further) until a ``Decided`` event brings the decision. A save does not
block training: it is asked for together with the next train step. But a trial trains
ahead of at most ``max_pending_saves`` unpersisted checkpoints: past that, the next
step waits for a save to be persisted, so scratch space and upload queues stay bounded
when storage is slower than training.

Failures (the trainable raised, its actor or node died) all take one path: the actor is
dropped and, within ``max_failures``, a new one is started and restored from the
newest persisted checkpoint (or started fresh when there is none); past the budget the
trial goes to ERROR, keeping the cause.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.core.best import has_metric
from orchestrator.core.checkpoints import Checkpoint
from orchestrator.core.events import (
    Action,
    ActorEvent,
    ActorReady,
    ApplyConfig,
    CheckpointUnavailable,
    ConfigRefused,
    Decided,
    Event,
    Failure,
    GraceExpired,
    HooksCaughtUp,
    Launch,
    Notify,
    PauseRequested,
    Report,
    Restore,
    RestoreDone,
    RestoreRequested,
    ResumeRequested,
    RunStarted,
    SaveDone,
    SaveFailed,
    SaveRequested,
    StopActor,
    StopRequested,
    Train,
    TrainResult,
    WaitForHooks,
)
from orchestrator.core.judge import Judgement, Verdict
from orchestrator.core.machine_state import Intent, MachineState, TrialPolicy, TrialState
from orchestrator.core.wire import FUNCTION_DONE, REPORTED_CHECKPOINT
from orchestrator.errors import InvalidTransition, TrialError

__all__ = [
    "ALL_EVENT_TYPES",
    "Intent",
    "TrialMachine",
    "TrialPolicy",
    "TrialState",
]


Handler = Callable[["TrialMachine", Any], list[Action]]


class TrialMachine(MachineState):
    """One trial's state, and the only code that changes it.

    ``handle(event)`` returns the actions to carry out, in order. An event the current
    state does not accept raises :class:`InvalidTransition` and changes nothing.
    """

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

    def _settle_if_idle(self) -> list[Action]:
        """Carry out the pending intent once nothing is in flight."""
        if self.train_in_flight or self.saves_in_flight:
            return []
        intent, target, config = self.intent, self.intent_checkpoint, self.intent_config
        if intent in (Intent.FINISH, Intent.STOP):
            return self._release(TrialState.TERMINATED)
        if intent is Intent.PAUSE:
            return self._release(TrialState.PAUSED)
        if intent is Intent.RESTORE:
            assert target is not None
            self.intent, self.intent_checkpoint, self.intent_config = None, None, None
            self.restore_target, self.restore_config = target, config
            self.state = TrialState.RESTORING
            return [Restore(self.generation, target, config)]
        return self._next_step()

    def _train(self) -> list[Action]:
        self.train_in_flight = True
        self.waiting_for_hooks = False
        self.reported_at_call = self.results_reported
        steps = self.policy.steps_per_call
        slice_s = self.policy.time_slice
        if slice_s is not None and self.last_step_s >= slice_s:
            steps = 1  # a step fills the slice alone: one per call, the cheapest call
        if steps > 1:
            every = self.policy.checkpoint_every
            if every > 0:
                steps = min(steps, every - self.iteration % every)
            point = self.policy.judge.next_decision_at(self.iteration)
            if point is not None:
                steps = min(steps, max(1, point - self.iteration))
        return [Train(self.generation, steps, slice_s if steps > 1 else None)]

    def _next_step(self) -> list[Action]:
        """The next step, unless the judge holds the trial, too many saves are still
        being persisted or its result hooks lag: then ``Decided``, ``SaveDone`` or
        ``HooksCaughtUp`` asks for it."""
        if self.held or self.saves_in_flight > self.policy.max_pending_saves:
            return []
        if self._behind_hooks():
            self.waiting_for_hooks = True
            return [WaitForHooks(self.reported_at_call)]
        return self._train()

    def _apply(self, judgement: Judgement) -> None:
        """What the judge decided about the newest result."""
        verdict = judgement.verdict
        if verdict is Verdict.FINISH:
            self._want(Intent.FINISH)
        elif verdict is Verdict.PAUSE:
            self._want(Intent.PAUSE)
        elif verdict is Verdict.HOLD:
            self.held = True
        elif verdict is Verdict.EXPLOIT:
            assert judgement.checkpoint is not None
            self._want(Intent.RESTORE, judgement.checkpoint, judgement.config)

    # -- handlers ------------------------------------------------------------------

    def _on_launch(self, event: Launch) -> list[Action]:
        # A new trial has no checkpoint; one resumed after a driver restart has.
        return self._start_actor(self.latest_checkpoint) + [Notify("on_trial_start")]

    def _on_actor_ready(self, event: ActorReady) -> list[Action]:
        if self.restore_target is not None:
            self.state = TrialState.RESTORING
            return [Restore(self.generation, self.restore_target, self.restore_config)]
        return self._begin_running(None)

    def _on_restore_done(self, event: RestoreDone) -> list[Action]:
        return self._begin_running(event.checkpoint)

    def _begin_running(self, ckpt: Checkpoint | None) -> list[Action]:
        """The trainable holds ``ckpt``'s state (``None``: fresh): continue from there."""
        self.iteration = ckpt.iteration if ckpt is not None else 0
        self.saved_iteration = self.iteration if ckpt is not None else -1
        self.restore_target = self.restore_config = None
        self.held = False
        self.state = TrialState.RUNNING
        actions: list[Action] = [RunStarted(self.iteration), *self._start_timeline(ckpt)]
        if ckpt is not None:
            actions.append(Notify("on_trial_restore", (ckpt,)))
        if self.intent is not None:
            return actions + self._settle_if_idle()
        return actions + self._next_step()

    def _on_train_result(self, event: TrainResult) -> list[Action]:
        if not self.train_in_flight:
            raise InvalidTransition(
                f"trial {self.trial_id}: a train result but no train call was asked for"
            )
        self.train_in_flight = False
        self.consecutive_failures = 0
        if not self.storage_down:
            self.error = None  # it recovered: the history stays in ``errors``
        actions: list[Action] = []
        judge = self.policy.judge
        decided = self.held
        reported = False  # the trainable reported a checkpoint with its last result
        for metrics in event.results:
            if metrics.get(FUNCTION_DONE):
                # A function trainable's function returned: a pseudo-result (the last of
                # its batch), never recorded. The trial is done.
                self._want(Intent.FINISH)
                break
            self.iteration += 1
            result = {**metrics, "training_iteration": self.iteration, "trial_id": self.trial_id}
            reported = bool(result.pop(REPORTED_CHECKPOINT, False))
            self.last_metrics = result
            took = result.get("time_this_iter_s")
            if type(took) is float:
                self.last_step_s = took
                if took > self.longest_step_s:
                    self.longest_step_s = took
            actions.append(Report(result))
            self.results_reported += 1
            if not self.metrics_checked:
                self.metrics_checked = True
                required = self.policy.required_metrics
                missing = [k for k in required if not has_metric(result, k)]
                if missing:
                    return actions + self._fail_at_once(_missing_metrics(self, missing, result))
            # A result of a run about to be rolled back (a restore is pending) is not
            # judged: its stop criterion or a scheduler must not override the restore.
            if not decided and self.intent is not Intent.RESTORE:
                judgement = judge.judge(result)
                if judgement.verdict is not Verdict.CONTINUE:
                    self._apply(judgement)
                    decided = True
        every = self.policy.checkpoint_every
        due = reported or self.save_wanted or (every > 0 and self.iteration % every == 0)
        self.save_wanted = False
        if self.intent is None:
            if due:
                actions += self._save()
            return actions + self._next_step()
        if (due and not self.storage_down) or self._needs_final_save():
            actions += self._save()  # (a trial pausing because storage failed saves no more)
        return actions + self._settle_if_idle()

    def _on_save_done(self, event: SaveDone) -> list[Action]:
        self._expect_save(event)
        self.saves_in_flight -= 1
        self.checkpoints.append(event.checkpoint)
        self.checkpoints.sort(key=lambda c: c.iteration)
        actions: list[Action] = [Notify("on_checkpoint", (event.checkpoint,))]
        actions += self._retain()
        if self.intent is not None:
            actions += self._settle_if_idle()
        elif not self.train_in_flight:
            # Training waited for this save (or an intent was withdrawn while it was in
            # flight, e.g. a resume cancelling a pause): go on.
            actions += self._next_step()
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
        intent, wanted, config = self.intent, self.intent_checkpoint, self.intent_config
        if intent is not Intent.RESTORE and not load_failed:
            # The actor died on the way to a restore (a rollback, an exploit): the new
            # one goes there too, never back to the timeline being left.
            wanted, config = self.restore_target, self.restore_config
        actions: list[Action] = [
            StopActor(self.generation, graceful=False),
            Notify("on_trial_error", (event.error,)),
        ]
        self.state = TrialState.PENDING  # no actor any more; decided below
        if intent is Intent.STOP:
            return actions + self._release(TrialState.TERMINATED)
        if intent is Intent.PAUSE:
            return actions + self._release(TrialState.PAUSED)
        target: Checkpoint | None = fallback
        if wanted is not None and wanted.key not in self.bad_checkpoints:
            target = wanted
            if config is not None:
                actions.append(ApplyConfig(config))  # the new actor is set up with it
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
        # The first restart is at once; consecutive failures back off from there.
        delay = self.policy.restart_backoff.delay(self.consecutive_failures - 1)
        return actions + self._start_actor(target, delay)

    def _on_checkpoint_unavailable(self, event: CheckpointUnavailable) -> list[Action]:
        self.bad_checkpoints.add(event.checkpoint.key)
        target = self.latest_checkpoint
        if target is not None:
            self.restore_target = target
            return [Restore(self.generation, target, self.restore_config)]
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
        self.restore_target = self.restore_config = None
        return actions

    def _on_config_refused(self, event: ConfigRefused) -> list[Action]:
        """The trainable cannot take the new config in place: a new actor, set up with
        it, loads the checkpoint instead."""
        return [StopActor(self.generation)] + self._start_actor(event.checkpoint)

    def _on_save_failed(self, event: SaveFailed) -> list[Action]:
        self._expect_save(event)
        self.saves_in_flight -= 1
        self.errors.append(event.error)
        if self.storage_down:  # a later save that was in flight: the same news again
            return self._settle_if_idle()
        self.storage_down = True
        self.error = event.error
        self._want(Intent.PAUSE)
        return [Notify("on_trial_error", (event.error,))] + self._settle_if_idle()

    def _on_stop(self, event: StopRequested) -> list[Action]:
        return self._end_or_pause(Intent.STOP, TrialState.TERMINATED)

    def _on_pause(self, event: PauseRequested) -> list[Action]:
        return self._end_or_pause(Intent.PAUSE, TrialState.PAUSED)

    def _end_or_pause(self, intent: Intent, settled: TrialState) -> list[Action]:
        if self.state is TrialState.RUNNING or self.state is TrialState.RESTORING:
            self._want(intent)
            if self.state is TrialState.RESTORING or self.train_in_flight:
                # The step's result will save (a save now would run after it); a call
                # that never returns ends with the grace period.
                return self._arm_grace()
            if self._needs_final_save():
                return self._save() + self._arm_grace()
            actions = self._settle_if_idle()
            return actions + self._arm_grace() if self.state.has_actor else actions
        return self._release(settled)

    def _on_grace_expired(self, event: GraceExpired) -> list[Action]:
        """A stop or pause waited its grace period for the call in flight."""
        if event.token != self.grace_token or self.intent in (None, Intent.RESTORE):
            return []
        if self.state is TrialState.RUNNING and not self.train_in_flight:
            if not self.saves_in_flight:
                return []
            if not self.grace_extended:  # only saves are left: an upload has its own limit
                self.grace_extended = True
                return self._arm_grace(self.policy.save_grace_s)
        # Stuck: kill the process, and settle as asked without what was in flight (a
        # paused trial resumes from its newest persisted checkpoint).
        settled = TrialState.PAUSED if self.intent is Intent.PAUSE else TrialState.TERMINATED
        actions: list[Action] = [StopActor(self.generation, graceful=False, stuck=True)]
        self.state = TrialState.PENDING  # no actor any more
        return actions + self._release(settled)

    def _on_resume(self, event: ResumeRequested) -> list[Action]:
        self._revive()
        return self._start_actor(self.latest_checkpoint)

    def _on_resume_active(self, event: ResumeRequested) -> list[Action]:
        """Resuming a trial that is still pausing cancels the pause."""
        if self.intent is Intent.PAUSE:
            self.intent = None
            self._disarm_grace()
            if self.state is TrialState.RUNNING and not self.train_in_flight:
                return self._next_step()  # the pause's save may still be in flight
        return []

    def _on_restore_request(self, event: RestoreRequested) -> list[Action]:
        if self.state is TrialState.RUNNING:
            self._want(Intent.RESTORE, event.checkpoint, event.config)
            return self._settle_if_idle()
        if self.state is TrialState.RESTORING:
            self._want(Intent.RESTORE, event.checkpoint, event.config)
            return []
        if self.state is TrialState.STARTING:
            self.restore_target, self.restore_config = event.checkpoint, event.config
            return []
        # PENDING, PAUSED, TERMINATED, ERROR: bring it (back) to life at that checkpoint,
        # with its new config from the start.
        self._revive()
        self.bad_checkpoints.discard(event.checkpoint.key)
        applied: list[Action] = [ApplyConfig(event.config)] if event.config is not None else []
        return applied + self._start_actor(event.checkpoint)

    def _on_decided(self, event: Decided) -> list[Action]:
        """The decision a held trial waited for."""
        self.held = False
        self._apply(event.judgement)
        if self.intent is not None:
            if not self.train_in_flight and self._needs_final_save():
                return self._save()
            return self._settle_if_idle()
        if not self.train_in_flight:
            return self._next_step()
        return []

    def _on_hooks_caught_up(self, event: HooksCaughtUp) -> list[Action]:
        self.results_hooked = max(self.results_hooked, event.seen)
        waiting = self.waiting_for_hooks and self.state is TrialState.RUNNING
        if not waiting or self.intent is not None or self.train_in_flight:
            return []
        return self._next_step()  # waits again if the hooks are still behind

    def _on_save_request(self, event: SaveRequested) -> list[Action]:
        self.save_wanted = self.policy.saves_on_demand
        return []

    def _ignore(self, event: Event) -> list[Action]:
        return []


def _missing_metrics(
    machine: TrialMachine, missing: list[str], result: Mapping[str, Any]
) -> TrialError:
    uses = machine.policy.required_metrics
    names = " and ".join(f"{uses[k]} {k!r}" for k in missing)
    reported = ", ".join(repr(k) for k in result)
    return TrialError(
        machine.trial_id,
        f"its first result does not report {names} (it reported {reported}); fix the "
        "name, or pass Orchestrator(strict_metrics=False) if it first appears in later "
        "results",
    )


_ACTOR_EVENTS: dict[type[Event], Handler] = {
    Failure: TrialMachine._on_failure,
    GraceExpired: TrialMachine._on_grace_expired,
}
_REQUESTS: dict[type[Event], Handler] = {
    HooksCaughtUp: TrialMachine._on_hooks_caught_up,
    SaveRequested: TrialMachine._on_save_request,
    StopRequested: TrialMachine._on_stop,
    PauseRequested: TrialMachine._on_pause,
    RestoreRequested: TrialMachine._on_restore_request,
}
_SETTLED: dict[type[Event], Handler] = {
    HooksCaughtUp: TrialMachine._on_hooks_caught_up,
    SaveRequested: TrialMachine._ignore,
    StopRequested: TrialMachine._ignore,
    PauseRequested: TrialMachine._ignore,
    Decided: TrialMachine._ignore,  # too late: it settled meanwhile
    RestoreRequested: TrialMachine._on_restore_request,
}

#: Every legal (state, event) pair and its handler. Anything else is InvalidTransition.
_TRANSITIONS: dict[TrialState, dict[type[Event], Handler]] = {
    TrialState.PENDING: {
        Launch: TrialMachine._on_launch,
        ResumeRequested: TrialMachine._ignore,
        Decided: TrialMachine._ignore,
        **_REQUESTS,
    },
    TrialState.STARTING: {
        ActorReady: TrialMachine._on_actor_ready,
        ResumeRequested: TrialMachine._on_resume_active,
        Decided: TrialMachine._ignore,
        **_ACTOR_EVENTS,
        **_REQUESTS,
    },
    TrialState.RESTORING: {
        RestoreDone: TrialMachine._on_restore_done,
        CheckpointUnavailable: TrialMachine._on_checkpoint_unavailable,
        ConfigRefused: TrialMachine._on_config_refused,
        ResumeRequested: TrialMachine._on_resume_active,
        Decided: TrialMachine._ignore,
        **_ACTOR_EVENTS,
        **_REQUESTS,
    },
    TrialState.RUNNING: {
        TrainResult: TrialMachine._on_train_result,
        SaveDone: TrialMachine._on_save_done,
        SaveFailed: TrialMachine._on_save_failed,
        ResumeRequested: TrialMachine._on_resume_active,
        Decided: TrialMachine._on_decided,
        **_ACTOR_EVENTS,
        **_REQUESTS,
    },
    TrialState.PAUSED: {
        **_SETTLED,
        ResumeRequested: TrialMachine._on_resume,
        StopRequested: TrialMachine._on_stop,
    },
    TrialState.TERMINATED: {**_SETTLED, ResumeRequested: TrialMachine._ignore},
    TrialState.ERROR: {**_SETTLED, ResumeRequested: TrialMachine._on_resume},
}

ALL_EVENT_TYPES: tuple[type[Event], ...] = (
    Launch,
    ActorReady,
    TrainResult,
    SaveDone,
    SaveFailed,
    RestoreDone,
    CheckpointUnavailable,
    ConfigRefused,
    Failure,
    StopRequested,
    PauseRequested,
    ResumeRequested,
    RestoreRequested,
    Decided,
    HooksCaughtUp,
    GraceExpired,
    SaveRequested,
)


def __getattr__(name: str) -> Any:
    """The events and actions moved to :mod:`orchestrator.core.events`; reach them here too."""
    from orchestrator.core import events

    try:
        return getattr(events, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
