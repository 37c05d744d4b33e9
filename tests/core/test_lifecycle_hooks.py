"""The machine and a trial's result hooks, driven by hand: no Ray, no asyncio.

A user's ``on_trial_result`` hook runs off the loop's path, so a fast trial could run far
past the result a hook is looking at; these pin down how far (two calls) and that a
request made from a hook on a result is carried out even when that call's results would
have ended the trial.
"""

from __future__ import annotations

from typing import Any

from orchestrator.core.decisions import RestoreFrom
from orchestrator.core.events import (
    Decided,
    HooksCaughtUp,
    Restore,
    RestoreDone,
    RunStarted,
    SaveDone,
    Train,
    TrainResult,
    WaitForHooks,
)
from orchestrator.core.machine import TrialMachine, TrialState

from ..support.machines import ckpt, kinds, running


def results(m: TrialMachine, n: int) -> list[Any]:
    """The call in flight returns ``n`` results."""
    return m.handle(TrainResult(m.generation, tuple({"x": i} for i in range(n))))


def train(actions: list[Any]) -> Train:
    (call,) = [a for a in actions if isinstance(a, Train)]
    return call


def test_a_restore_asked_for_during_a_call_survives_the_results_that_end_the_trial() -> None:
    """The public-API check: a hook on result 12 restores checkpoint 5 while the call for
    16..20 is in flight; result 20 meets the stop criterion, and used to end the trial
    (the stop outranked the restore), so the request failed with "TERMINATED"."""
    m = running(stop={"training_iteration": 20}, checkpoint_every=5, steps_per_call=1000)
    for _ in range(3):  # 1..5, 6..10, 11..15: each call stops at a checkpoint
        actions = results(m, 5)
        m.handle(SaveDone(m.generation, ckpt(m.iteration)))
    assert train(actions).steps == 5 and m.iteration == 15
    target = m.checkpoints[0]
    assert m.handle(Decided(RestoreFrom("t", target))) == []  # waits for 16..20
    actions = results(m, 5)
    assert m.iteration == 20 and m.state is TrialState.RUNNING
    assert kinds(actions) == ["Report"] * 5 + ["Save"]  # the due checkpoint, then restore
    actions = m.handle(SaveDone(m.generation, ckpt(20)))
    restore = next(a for a in actions if isinstance(a, Restore))
    assert restore.checkpoint == target and m.state is TrialState.RESTORING
    actions = m.handle(RestoreDone(m.generation, target))
    assert actions[0] == RunStarted(5) and m.iteration == 5
    assert "Train" in kinds(actions)


class Hooks:
    """What the hook runner tells the machine: how many results the hooks have seen."""

    def __init__(self) -> None:
        self.count = 0

    def seen(self, trial_id: str) -> int | None:
        return self.count


def test_training_runs_at_most_two_calls_past_what_result_hooks_have_seen() -> None:
    hooks = Hooks()
    m = running(steps_per_call=4, hook_progress=hooks)
    first = results(m, 4)  # results 1..4; the call before it had no results
    assert train(first).steps == 4 and m.reported_at_call == 4
    # 5..8 are back, and the hooks have not seen 1..4 yet: the next call waits.
    hooks.count = 3
    actions = results(m, 4)
    assert kinds(actions) == ["Report"] * 4 + ["WaitForHooks"]
    assert actions[-1] == WaitForHooks(4) and m.waiting_for_hooks
    assert not m.train_in_flight and m.results_hooked == 3
    assert m.handle(HooksCaughtUp(3)) == [WaitForHooks(4)]  # still behind: asks again
    hooks.count = 4
    actions = m.handle(HooksCaughtUp(4))
    assert train(actions).steps == 4 and not m.waiting_for_hooks
    assert m.reported_at_call == 8
    # Hooks that keep up (they saw 5..8 during the call for 9..12): no waiting, and
    # no event needed: the machine reads the count when it decides.
    hooks.count = 8
    assert "Train" in kinds(results(m, 4))
    hooks.count = 16
    assert "Train" in kinds(results(m, 4))


def test_without_result_hooks_training_never_waits_for_them() -> None:
    m = running(steps_per_call=4)
    for _ in range(5):
        assert "Train" in kinds(results(m, 4))


def test_a_restore_from_a_hook_is_carried_out_while_training_waits_for_the_hooks() -> None:
    """The hook that asks is itself what training waits for: the restore must not."""
    m = running(steps_per_call=2, checkpoint_every=2, hook_progress=Hooks())
    results(m, 2)
    m.handle(SaveDone(m.generation, ckpt(2)))
    results(m, 2)
    assert m.handle(SaveDone(m.generation, ckpt(4)))[-1] == WaitForHooks(2)
    assert m.waiting_for_hooks
    actions = m.handle(Decided(RestoreFrom("t", m.checkpoints[0])))
    assert "Restore" in kinds(actions)
    actions = m.handle(RestoreDone(m.generation, m.checkpoints[0]))
    assert actions[0] == RunStarted(2)
    assert actions[-1] == WaitForHooks(2)  # and training waits for the hooks again
    assert "Train" in kinds(m.handle(HooksCaughtUp(4)))


def test_a_new_hook_runner_owes_nothing_to_the_old_one() -> None:
    m = running(steps_per_call=4, hook_progress=Hooks())
    results(m, 4)
    results(m, 4)
    assert m.waiting_for_hooks
    m.hooks_restarted()
    assert m.results_hooked == m.results_reported == 8
    assert "Train" in kinds(m.handle(HooksCaughtUp(8)))


def test_hooks_caught_up_in_any_state_only_counts() -> None:
    m = running(stop={"training_iteration": 2}, hook_progress=Hooks())
    results(m, 1)
    results(m, 1)
    assert m.state is TrialState.TERMINATED
    assert m.handle(HooksCaughtUp(2)) == [] and m.results_hooked == 2
