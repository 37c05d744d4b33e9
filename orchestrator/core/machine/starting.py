"""Handlers: a trial gets an actor and the state it continues from (launched, the
actor ready, a checkpoint loaded, or not reachable, or a new config refused in place)."""

from __future__ import annotations

from orchestrator.core.events import (
    Action,
    ActorReady,
    CheckpointUnavailable,
    ConfigRefused,
    Launch,
    Notify,
    Restore,
    RestoreDone,
    StopActor,
)
from orchestrator.core.machine.states import Intent, TrialState
from orchestrator.core.machine.steps import TrialSteps
from orchestrator.errors import TrialError

__all__ = [
    "on_actor_ready",
    "on_checkpoint_unavailable",
    "on_config_refused",
    "on_launch",
    "on_restore_done",
]


def on_launch(m: TrialSteps, event: Launch) -> list[Action]:
    # A new trial has no checkpoint; one resumed after a driver restart has.
    return m._start_actor(m.latest_checkpoint) + [Notify("on_trial_start")]


def on_actor_ready(m: TrialSteps, event: ActorReady) -> list[Action]:
    if m.restore_target is not None:
        m._move(TrialState.RESTORING)
        return [Restore(m.generation, m.restore_target, m.restore_config)]
    return m._begin_running(None)


def on_restore_done(m: TrialSteps, event: RestoreDone) -> list[Action]:
    return m._begin_running(event.checkpoint)


def on_checkpoint_unavailable(m: TrialSteps, event: CheckpointUnavailable) -> list[Action]:
    m._mark_bad(event.checkpoint.key)
    target = m.latest_checkpoint
    if target is not None:
        m.restore_target = target
        return [Restore(m.generation, target, m.restore_config)]
    if m.policy.fallback_to_scratch:
        return m._begin_running(None)
    error = TrialError(
        m.trial_id,
        f"no checkpoint can reach its new actor (last: {event.error}); their files "
        "are gone, or only on disks no live node can read: pass "
        "fallback_to_scratch=True to let it start over",
        event.error,
    )
    m._record_error(error)
    actions: list[Action] = [
        StopActor(m.generation, graceful=False),
        Notify("on_trial_error", (error,)),
    ]
    return actions + m._release(TrialState.ERROR, actor_stopped=True)


def on_config_refused(m: TrialSteps, event: ConfigRefused) -> list[Action]:
    """The trainable cannot take the new config in place: a new actor, set up with it,
    loads the checkpoint instead; unless a stop or pause was decided meanwhile: it
    settles now, without the restore (a new actor would forget the decision)."""
    if m.intent is Intent.STOP:
        return m._release(TrialState.TERMINATED)
    if m.intent is Intent.PAUSE:
        return m._release(TrialState.PAUSED)
    return [StopActor(m.generation)] + m._start_actor(event.checkpoint)
