"""Handlers: a RUNNING trial's work comes back (results, saves persisted or not) and its
result hooks catch up."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.core.best import has_metric
from orchestrator.core.decisions import Decision, Pause, RestoreFrom, Stop
from orchestrator.core.events import (
    Action,
    HooksCaughtUp,
    Notify,
    Report,
    SaveDone,
    SaveFailed,
    SaveRequested,
    TrainResult,
)
from orchestrator.core.judge import decides
from orchestrator.core.machine.states import Intent, TrialState
from orchestrator.core.machine.steps import TrialSteps
from orchestrator.core.result_dicts import result_dict
from orchestrator.core.wire import FUNCTION_DONE, REPORTED_CHECKPOINT
from orchestrator.errors import InvalidTransition, TrialError

__all__ = ["on_hooks_caught_up", "on_save_done", "on_save_failed", "on_train_result"]


def on_train_result(m: TrialSteps, event: TrainResult) -> list[Action]:
    """Record each result and show it to the judge before anything else is asked for.
    What the judge decides is carried out right after, as the ``Decided`` event it is
    (``TrialMachine.handle``): a scheduler's ``Stop`` on a result and a user's
    ``trial.stop()`` take the same path."""
    if not m.train_in_flight:
        raise InvalidTransition(
            f"trial {m.trial_id}: a train result but no train call was asked for"
        )
    m.train_in_flight = False
    m.consecutive_failures = 0
    if not m.storage_down:
        m.error = None  # it recovered: the history stays in ``errors``
    actions: list[Action] = []
    judge = m.policy.judge
    # A held trial's results wait for the decision it is held for; a result of a run
    # about to be rolled back (a restore is pending) is not judged: its stop criterion
    # or a scheduler must not override the restore.
    judging = not m.held and m.intent is not Intent.RESTORE
    decision: Decision | None = None
    reported = False  # the trainable reported a checkpoint with its last result
    for metrics in event.results:
        if metrics.get(FUNCTION_DONE):
            # A function trainable's function returned: a pseudo-result (the last of
            # its batch), never recorded. The trial is done.
            decision = Stop(m.trial_id)
            break
        m.iteration += 1
        # Its keys shared with every result of the same names (``core/result_dicts.py``):
        # a finished trial keeps its last one for the whole experiment (issue 36).
        result = result_dict(metrics, training_iteration=m.iteration, trial_id=m.trial_id)
        reported = bool(result.pop(REPORTED_CHECKPOINT, False))
        m.last_metrics = result
        took = result.get("time_this_iter_s")
        if type(took) is float:
            m.last_step_s = took
            if took > m.longest_step_s:
                m.longest_step_s = took
        actions.append(Report(result))
        m.results_reported += 1
        if not m.metrics_checked:
            m.metrics_checked = True
            missing = [k for k in m.policy.required_metrics if not has_metric(result, k)]
            if missing:
                return actions + m._fail_at_once(_missing_metrics(m, missing, result))
        if judging and decision is None:
            judged = judge.judge(result)
            if judged is not None and decides(judged):
                decision = judged
    every = m.policy.checkpoint_every
    due = reported or m.save_wanted or (every > 0 and m.iteration % every == 0)
    m.save_wanted = False
    # The iteration's own checkpoint, unless storage is down and the trial is ending
    # (a trial pausing because storage failed saves no more).
    if due and not (m.storage_down and _ending(m, decision)):
        actions += m._save()
    if decision is not None:
        m._then = decision
        return actions
    return actions + m._proceed()


def _ending(m: TrialSteps, decision: Decision | None) -> bool:
    return m.intent is not None or isinstance(decision, Stop | Pause | RestoreFrom)


def on_save_done(m: TrialSteps, event: SaveDone) -> list[Action]:
    m._expect_save(event)
    m.saves_in_flight -= 1
    actions: list[Action] = [Notify("on_checkpoint", (event.checkpoint,))]
    actions += m._persisted(event.checkpoint)
    if m.intent is not None:
        actions += m._settle_if_idle()
    elif not m.train_in_flight:
        # Training waited for this save (or a pause was cancelled while it was in
        # flight): go on.
        actions += m._next_step()
    return actions


def on_save_failed(m: TrialSteps, event: SaveFailed) -> list[Action]:
    m._expect_save(event)
    m.saves_in_flight -= 1
    m.errors = [*m.errors, event.error]
    if event.trains_on:  # storage is fine: its next save stores what this one lost
        if m.intent is not None:
            return m._settle_if_idle()
        return [] if m.train_in_flight else m._next_step()
    if m.storage_down:  # a later save that was in flight: the same news again
        return m._settle_if_idle()
    m.storage_down = True
    m.error = event.error
    m._want(Intent.PAUSE)
    return [Notify("on_trial_error", (event.error,))] + m._settle_if_idle()


def on_save_request(m: TrialSteps, event: SaveRequested) -> list[Action]:
    """Save after the next result; a trainable that saves only when it says so has
    nothing to save on demand."""
    m.save_wanted = m.policy.saves_on_demand
    return []


def on_hooks_caught_up(m: TrialSteps, event: HooksCaughtUp) -> list[Action]:
    m.results_hooked = max(m.results_hooked, event.seen)
    waiting = m.waiting_for_hooks and m.state is TrialState.RUNNING
    if not waiting or m.intent is not None or m.train_in_flight:
        return []
    return m._next_step()  # waits again if the hooks are still behind


def _missing_metrics(m: TrialSteps, missing: list[str], result: Mapping[str, Any]) -> TrialError:
    uses = m.policy.required_metrics
    names = " and ".join(f"{uses[k]} {k!r}" for k in missing)
    reported = ", ".join(repr(k) for k in result)
    return TrialError(
        m.trial_id,
        f"its first result does not report {names} (it reported {reported}); fix the "
        "name, or pass Orchestrator(strict_metrics=False) if it first appears in later "
        "results",
    )
