"""Handlers: a decision about the trial, whoever made it (the user, a scheduler, the
judge on a result, a function that returned), carried out the same way.

A trial with an actor *wants* an end (``Intent``): it stops asking for steps, finishes
what is in flight (a step, a restore, saves; with a grace period for a call that never
comes back), saves a final checkpoint when the one rule says so
(``TrialSteps._needs_final_save``: a stop when the trial checkpoints at all, a pause
always), and then settles. A trial without one settles at once.
"""

from __future__ import annotations

from orchestrator.core.decisions import Continue, Decision, Hold, Pause, RestoreFrom, Resume, Stop
from orchestrator.core.events import Action, ApplyConfig
from orchestrator.core.machine.states import Intent, TrialState
from orchestrator.core.machine.steps import TrialSteps

__all__ = [
    "go_on",
    "hold",
    "ignore",
    "keep_running",
    "pause_now",
    "pause_when_idle",
    "restore_at_once",
    "restore_next",
    "restore_on_ready",
    "restore_when_idle",
    "resume",
    "stop_now",
    "stop_when_idle",
]


def stop_when_idle(m: TrialSteps, decision: Stop) -> list[Action]:
    if decision.at_once:
        return m._stop_at_once()
    return _end_when_idle(m, Intent.STOP)


def pause_when_idle(m: TrialSteps, decision: Pause) -> list[Action]:
    return _end_when_idle(m, Intent.PAUSE)


def _end_when_idle(m: TrialSteps, intent: Intent) -> list[Action]:
    m._want(intent)
    # Idle, it saves or settles now; else what is in flight finishes first (a step's
    # result saves, if the rule says so), and a call that never returns ends with the
    # grace period.
    actions = m._proceed()
    return actions + m._arm_grace() if m.state.has_actor else actions


def stop_now(m: TrialSteps, decision: Stop) -> list[Action]:
    return m._release(TrialState.TERMINATED)


def pause_now(m: TrialSteps, decision: Pause) -> list[Action]:
    return m._release(TrialState.PAUSED)


def resume(m: TrialSteps, decision: Resume) -> list[Action]:
    """A PAUSED or ERROR trial continues from its newest checkpoint."""
    m._revive()
    return m._start_actor(m.latest_checkpoint)


def keep_running(m: TrialSteps, decision: Resume) -> list[Action]:
    """Resuming a trial that is still pausing cancels the pause."""
    if m.intent is not Intent.PAUSE:
        return []
    m.intent = None
    m._disarm_grace()
    return m._proceed()  # the pause's save may still be in flight: training goes on


def restore_when_idle(m: TrialSteps, decision: RestoreFrom) -> list[Action]:
    """RUNNING: restore once what is in flight is back."""
    m._want(Intent.RESTORE, decision.checkpoint, decision.config)
    return m._proceed()


def restore_next(m: TrialSteps, decision: RestoreFrom) -> list[Action]:
    """RESTORING: this restore follows the one in flight (a newer request wins)."""
    m._want(Intent.RESTORE, decision.checkpoint, decision.config)
    return []


def restore_on_ready(m: TrialSteps, decision: RestoreFrom) -> list[Action]:
    """STARTING: the actor being started restores it once ready; once its first call
    is back when that call went with the setup (a fresh start)."""
    if m.train_in_flight:
        m._want(Intent.RESTORE, decision.checkpoint, decision.config)
    else:
        m.restore_target, m.restore_config = decision.checkpoint, decision.config
    return []


def restore_at_once(m: TrialSteps, decision: RestoreFrom) -> list[Action]:
    """PENDING, PAUSED, TERMINATED, ERROR: bring it (back) to life at that checkpoint,
    with its new config from the start."""
    m._revive()
    m.bad_checkpoints = m.bad_checkpoints - {decision.checkpoint.key}
    config = decision.config
    applied: list[Action] = [ApplyConfig(config)] if config is not None else []
    return applied + m._start_actor(decision.checkpoint)


def go_on(m: TrialSteps, decision: Continue) -> list[Action]:
    """A held trial trains again (the decision it waited for)."""
    if not m.held:
        return []
    m.held = False
    return m._proceed()


def hold(m: TrialSteps, decision: Hold) -> list[Action]:
    """Train no further until a later decision; what was already decided still is."""
    m.held = True
    return m._proceed()


def ignore(m: TrialSteps, decision: Decision) -> list[Action]:
    """Nothing to do in this state (too late, or already so)."""
    return []
