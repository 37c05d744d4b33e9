"""Handlers: the trial's actor failed (the trainable raised, its actor or node died,
it cannot even be imported), or a call of a stop or pause never came back in time.

Failures take one path: the actor is dropped and, within ``max_failures``, a new one
is started and restored from the newest persisted checkpoint (or started fresh when
there is none); past the budget the trial goes to ERROR, keeping the cause. A failure
after a stop or pause was decided settles the trial as decided instead: a stopped trial
is not restarted only to reach the same decision again.
"""

from __future__ import annotations

from orchestrator.core.checkpoints import Checkpoint
from orchestrator.core.events import (
    Action,
    ApplyConfig,
    Failure,
    GraceExpired,
    Notify,
    StopActor,
)
from orchestrator.core.machine.states import Intent, TrialState
from orchestrator.core.machine.steps import TrialSteps
from orchestrator.errors import TrialError

__all__ = ["on_failure", "on_grace_expired"]


def on_failure(m: TrialSteps, event: Failure) -> list[Action]:
    if event.permanent:
        error = event.error
        if not isinstance(error, TrialError):
            error = TrialError(m.trial_id, str(error), error)
        return m._fail_at_once(error)
    load_failed = m.state is TrialState.RESTORING and not event.actor_died
    if load_failed and m.restore_target is not None:
        # The trainable could not load this checkpoint: fall back to an older one.
        m._mark_bad(m.restore_target.key)
    m.num_failures += 1
    m.consecutive_failures += 1
    fallback = m.latest_checkpoint
    if not (load_failed and fallback is not None):
        m.failures_counted += 1  # a usable older checkpoint costs no budget
    m._record_error(event.error)
    intent, wanted, config = m.intent, m.intent_checkpoint, m.intent_config
    if intent is not Intent.RESTORE and not load_failed:
        # The actor died on the way to a restore (a rollback, an exploit): the new
        # one goes there too, never back to the timeline being left.
        wanted, config = m.restore_target, m.restore_config
    actions: list[Action] = [
        StopActor(m.generation, graceful=False),
        Notify("on_trial_error", (event.error,)),
    ]
    if intent is Intent.STOP:
        return actions + m._release(TrialState.TERMINATED, actor_stopped=True)
    if intent is Intent.PAUSE:
        return actions + m._release(TrialState.PAUSED, actor_stopped=True)
    target: Checkpoint | None = fallback
    if wanted is not None and wanted.key not in m.bad_checkpoints:
        target = wanted
        if config is not None:
            actions.append(ApplyConfig(config))  # the new actor is set up with it
    if target is None and m.bad_checkpoints and not m.policy.fallback_to_scratch:
        m.error = TrialError(
            m.trial_id,
            f"none of its checkpoints could be loaded ({len(m.bad_checkpoints)} "
            f"tried; last error: {event.error}); pass fallback_to_scratch=True to let "
            "it start over from scratch",
            event.error,
        )
        return actions + m._release(TrialState.ERROR, actor_stopped=True)
    budget = m.policy.max_failures
    if budget >= 0 and m.failures_counted > budget:
        return actions + m._release(TrialState.ERROR, actor_stopped=True)
    # The first restart is at once; consecutive failures back off from there.
    delay = m.policy.restart_backoff.delay(m.consecutive_failures - 1)
    return actions + m._start_actor(target, delay)


def on_grace_expired(m: TrialSteps, event: GraceExpired) -> list[Action]:
    """A stop or pause waited its grace period for the call in flight."""
    if event.token != m.grace_token or m.intent in (None, Intent.RESTORE):
        return []
    if m.state is TrialState.RUNNING and not m.train_in_flight:
        if not m.saves_in_flight:
            return []
        if not m.grace_extended:  # only saves are left: an upload has its own limit
            m.grace_extended = True
            return m._arm_grace(m.policy.save_grace_s)
    # Stuck: kill the process, and settle as asked without what was in flight (a
    # paused trial resumes from its newest persisted checkpoint).
    settled = TrialState.PAUSED if m.intent is Intent.PAUSE else TrialState.TERMINATED
    actions: list[Action] = [StopActor(m.generation, graceful=False, stuck=True)]
    return actions + m._release(settled, actor_stopped=True)
