"""The small moves every handler is made of: start or release an actor, want an end,
ask for a save or the next step, settle what was wanted once nothing is in flight.

They are not decisions: which of them an input makes is the table's business
(:mod:`orchestrator.core.machine.table`), and a move that changes the state goes through
:meth:`~orchestrator.core.machine.record.TrialRecord._move`, which checks it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.core.checkpoints import Checkpoint
from orchestrator.core.events import (
    Action,
    ArmGrace,
    Event,
    Notify,
    Restore,
    RunStarted,
    Save,
    StartActor,
    StopActor,
    Train,
    WaitForHooks,
)
from orchestrator.core.judge import stop_already_met
from orchestrator.core.machine.record import TrialRecord
from orchestrator.core.machine.states import Intent, TrialState
from orchestrator.errors import InvalidTransition, TrialError

__all__ = ["TrialSteps"]


class TrialSteps(TrialRecord):
    """A trial's record with the moves its handlers are made of (see the module)."""

    __slots__ = ()

    # -- its actor -----------------------------------------------------------------------

    def _start_actor(self, target: Checkpoint | None, delay: float = 0.0) -> list[Action]:
        self.generation += 1
        self._move(TrialState.STARTING)
        self._clear_actor_work()
        self.restore_target = target
        return [StartActor(self.generation, delay, self._first_train(target))]

    def _first_train(self, target: Checkpoint | None) -> Train | None:
        """A fresh start's first call, decided now and sent behind the actor's setup
        (one round trip less per trial start: issue 36). Only from scratch at iteration
        0: the call is then what :meth:`_begin_running` would ask for once the actor is
        ready; a restore comes first otherwise, whose outcome decides the next call."""
        if target is not None or self.iteration != 0:
            return None
        (first,) = self._train()
        assert isinstance(first, Train)
        return first

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

    def _release(self, state: TrialState, *, actor_stopped: bool = False) -> list[Action]:
        """Settle in ``state``, letting its actor go (``actor_stopped``: it went
        already, killed)."""
        actions: list[Action] = []
        if self.state.has_actor and not actor_stopped:
            actions.append(StopActor(self.generation))
        self._move(state)
        self._clear_actor_work()
        if state is TrialState.TERMINATED:
            actions.append(Notify("on_trial_complete"))
        return actions

    def _stop_at_once(self) -> list[Action]:
        """TERMINATED now, dropping what is in flight (``Stop(at_once=True)``): an actor
        busy with a call is let go ungracefully (killed when it hosts only this trial),
        whatever that call returns is stale; an idle one is let go without a final save."""
        busy = (
            self.train_in_flight or self.saves_in_flight > 0 or (self.state is TrialState.RESTORING)
        )
        actions: list[Action] = [StopActor(self.generation, graceful=not busy)]
        return actions + self._release(TrialState.TERMINATED, actor_stopped=True)

    def _fail_at_once(self, error: TrialError) -> list[Action]:
        """ERROR now, without a retry: retrying cannot fix this one."""
        self.num_failures += 1
        self._record_error(error)
        actions: list[Action] = [
            StopActor(self.generation, graceful=False),
            Notify("on_trial_error", (error,)),
        ]
        self._move(TrialState.ERROR)
        self._clear_actor_work()
        return actions

    def _revive(self) -> None:
        """Somebody brings the trial back: a fresh failure budget, the old error gone."""
        self.error = None
        self.failures_counted = 0
        self.consecutive_failures = 0
        self.storage_down = False

    # -- what is wanted ------------------------------------------------------------------

    def _want(
        self,
        intent: Intent,
        checkpoint: Checkpoint | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        if intent is Intent.RESTORE:
            # A restore replaces a pending restore, but never a stop or a pause.
            if self.intent in (None, Intent.RESTORE):
                self.intent, self.intent_checkpoint, self.intent_config = intent, checkpoint, config
        elif self.intent is None or intent.value > self.intent.value:
            self.intent, self.intent_checkpoint, self.intent_config = intent, None, None

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

    # -- saves -----------------------------------------------------------------------------

    def _save(self) -> list[Action]:
        self.saves_in_flight += 1
        self.saved_iteration = self.iteration
        return [Save(self.generation, self.iteration)]

    def _needs_final_save(self) -> bool:
        """The one final-save rule: a stop saves when the trial checkpoints at all
        (``checkpoint_every > 0``), a pause always; neither when its newest iteration
        is saved already, storage is down, or the trainable saves only when it says so."""
        if self.saved_iteration == self.iteration or self.iteration == 0 or self.storage_down:
            return False
        if not self.policy.saves_on_demand:
            return False
        if self.intent is Intent.PAUSE:
            return True
        return self.intent is Intent.STOP and self.policy.checkpoint_every > 0

    def _expect_save(self, event: Event) -> None:
        if self.saves_in_flight <= 0:
            raise InvalidTransition(
                f"trial {self.trial_id}: {type(event).__name__} but no save was asked for"
            )

    # -- steps -----------------------------------------------------------------------------

    def _begin_running(self, ckpt: Checkpoint | None) -> list[Action]:
        """The trainable holds ``ckpt``'s state (``None``: fresh): continue from there."""
        self.iteration = ckpt.iteration if ckpt is not None else 0
        self.saved_iteration = self.iteration if ckpt is not None else -1
        self.restore_target = self.restore_config = None
        self.held = False
        self._move(TrialState.RUNNING)
        actions: list[Action] = [RunStarted(self.iteration), *self._start_timeline(ckpt)]
        if ckpt is not None:
            actions.append(Notify("on_trial_restore", (ckpt,)))
            reached = {**ckpt.metrics, "training_iteration": ckpt.iteration}
            if self.intent is None and stop_already_met(self.policy.judge, reached):
                self._want(Intent.STOP)  # e.g. its driver died between this save and its end
        return actions + self._proceed()

    def _proceed(self) -> list[Action]:
        """A RUNNING trial with no step in flight goes on: the next step, or what was
        decided carried out (its final save first, then settled once nothing is in
        flight)."""
        if self.state is not TrialState.RUNNING or self.train_in_flight:
            return []
        if self.intent is None:
            return self._next_step()
        if self._needs_final_save():
            return self._save()
        return self._settle_if_idle()

    def _settle_if_idle(self) -> list[Action]:
        """Carry out the pending intent once nothing is in flight."""
        if self.train_in_flight or self.saves_in_flight:
            return []
        intent, target, config = self.intent, self.intent_checkpoint, self.intent_config
        if intent is Intent.STOP:
            return self._release(TrialState.TERMINATED)
        if intent is Intent.PAUSE:
            return self._release(TrialState.PAUSED)
        if intent is Intent.RESTORE:
            assert target is not None
            self.intent, self.intent_checkpoint, self.intent_config = None, None, None
            self.restore_target, self.restore_config = target, config
            self._move(TrialState.RESTORING)
            return [Restore(self.generation, target, config)]
        return self._next_step()

    def _next_step(self) -> list[Action]:
        """The next step, unless it is held, too many saves are still being persisted
        or its result hooks lag: then a decision, ``SaveDone`` or ``HooksCaughtUp``
        asks for it."""
        if self.held or self.saves_in_flight > self.policy.max_pending_saves:
            return []
        if self._behind_hooks():
            self.waiting_for_hooks = True
            return [WaitForHooks(self.reported_at_call)]
        return self._train()

    def _train(self) -> list[Action]:
        self.train_in_flight = True
        self.waiting_for_hooks = False
        self.reported_at_call = self.results_reported
        steps = self.policy.steps_per_call
        slice_s = self.policy.time_slice
        if slice_s is not None and self.last_step_s >= slice_s:
            steps = 1  # a step fills the slice alone: one per call, the cheapest call
        point = self.policy.judge.next_decision_at(self.iteration)
        if steps > 1:
            every = self.policy.checkpoint_every
            if every > 0:
                steps = min(steps, every - self.iteration % every)
            if point is not None:
                steps = min(steps, max(1, point - self.iteration))
        # The call's last result is no decision point: a function may run on past it.
        run_on = point is None or point > self.iteration + steps
        return [Train(self.generation, steps, slice_s if steps > 1 else None, run_on)]

    def _behind_hooks(self) -> bool:
        """The trial's result hooks have not yet seen every result reported before its
        newest train call: the next call waits for them."""
        progress = self.policy.hook_progress
        if progress is None:
            return False
        if self.results_hooked < self.reported_at_call:
            seen = progress.seen(self.trial_id)
            if seen is None:
                return False  # no result hooks pace it (or none while not entered)
            self.results_hooked = max(self.results_hooked, seen)
        return self.results_hooked < self.reported_at_call
