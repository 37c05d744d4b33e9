"""One decision vocabulary from the scheduler to the machine, driven by hand (no Ray, no
asyncio): a judge's decision on a result, a user's request and a sweep's decision about
another trial are the same ``Decided`` event, carried out the same way; judges decide
before the next step; policies are built once and never change."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from orchestrator.core.decisions import Continue, Decision, Hold, Pause, RestoreFrom, Stop
from orchestrator.core.events import (
    ActorReady,
    ConfigRefused,
    Decided,
    Failure,
    Launch,
    Restore,
    RestoreDone,
    RunStarted,
    SaveDone,
    StartActor,
    Train,
    TrainResult,
)
from orchestrator.core.judge import Judges, StopJudge
from orchestrator.core.machine import TrialPolicy, TrialState
from orchestrator.core.stopping import StopCondition
from orchestrator.core.wire import FUNCTION_DONE
from orchestrator.schedulers import Exploit

from ..support.machines import ckpt, kinds, machine, result, running


class StopsAt:
    """A stub judge (what a scheduler is to the machine): Stop at ``at``, which it
    declares as its decision point."""

    def __init__(self, at: int, decision: Decision | None = None) -> None:
        self.at = at
        self.decision = decision or Stop("t")
        self.seen: list[int] = []

    def judge(self, result: dict[str, Any]) -> Decision | None:
        self.seen.append(result["training_iteration"])
        return self.decision if result["training_iteration"] >= self.at else None

    def next_decision_at(self, iteration: int) -> int | None:
        return self.at if iteration < self.at else None


class DecidesAt(StopsAt):
    """``decision`` at ``at`` exactly (once)."""

    def judge(self, result: dict[str, Any]) -> Decision | None:
        return self.decision if result["training_iteration"] == self.at else None


# -- judges: decisions before the next step ------------------------------------------------


def test_a_judge_caps_buffered_steps_and_ends_the_trial_exactly_there() -> None:
    judge = StopsAt(3)
    m = machine(steps_per_call=10, judge=judge)
    (start,) = [a for a in m.handle(Launch()) if isinstance(a, StartActor)]
    assert start.train is not None and start.train.steps == 3  # not 10
    assert "Train" not in kinds(m.handle(ActorReady(m.generation)))  # sent with the setup
    actions = m.handle(TrainResult(m.generation, tuple({"x": i} for i in range(3))))
    assert judge.seen == [1, 2, 3]
    assert m.state is TrialState.TERMINATED and m.iteration == 3
    assert "Train" not in kinds(actions)


def test_a_call_lets_a_function_run_on_only_past_a_result_no_decision_falls_on() -> None:
    """``Train.run_on``: the call's last result is before the judge's next decision
    point (or there is none), so a function may go on into its next step meanwhile."""

    def trains(actions: list[Any]) -> list[tuple[int, bool]]:
        calls = [a.train if isinstance(a, StartActor) else a for a in actions]
        return [(a.steps, a.run_on) for a in calls if isinstance(a, Train)]

    m = machine(steps_per_call=1, judge=StopsAt(3))
    assert trains(m.handle(Launch())) == [(1, True)]  # the first call, behind the setup
    m.handle(ActorReady(m.generation))
    assert trains(m.handle(TrainResult(m.generation, ({"x": 1},)))) == [(1, True)]
    assert trains(m.handle(TrainResult(m.generation, ({"x": 2},)))) == [(1, False)]  # 3 next
    assert m.handle(TrainResult(m.generation, ({"x": 3},))) and m.state is TrialState.TERMINATED

    buffered = machine(steps_per_call=10, judge=StopsAt(3))
    assert trains(buffered.handle(Launch())) == [(3, False)]
    free = running(steps_per_call=1)  # no judge, no decision point: always
    assert trains(free.handle(TrainResult(free.generation, ({"x": 1},)))) == [(1, True)]


def test_a_held_trial_trains_no_further_until_decided() -> None:
    m = running(judge=DecidesAt(2, Hold("t")))
    result(m)
    actions = result(m)  # iteration 2: held
    assert kinds(actions) == ["Report"] and m.held and not m.train_in_flight
    assert m.state is TrialState.RUNNING
    assert kinds(m.handle(Decided(Continue("t")))) == ["Train"]
    assert not m.held
    result(m)
    m.handle(Decided(Stop("t")))  # a step is in flight: it applies at its result
    assert m.state is TrialState.RUNNING and m.intent is not None


def test_a_hold_then_pause_saves_and_pauses() -> None:
    m = running(judge=DecidesAt(1, Hold("t")), checkpoint_every=0)
    result(m)
    assert m.held
    actions = m.handle(Decided(Pause("t")))
    assert kinds(actions) == ["Save", "ArmGrace"]
    m.handle(SaveDone(m.generation, ckpt(1)))
    assert m.state is TrialState.PAUSED


def test_an_exploit_restores_another_trials_checkpoint_with_its_config() -> None:
    donor = ckpt(4, trial="donor")
    m = running(judge=DecidesAt(2, Exploit("t", "donor", donor, {"lr": 0.5})))
    result(m)
    actions = result(m)
    restore = next(a for a in actions if isinstance(a, Restore))
    assert restore.checkpoint == donor and restore.config == {"lr": 0.5}
    assert donor.key in m.pinned
    actions = m.handle(RestoreDone(m.generation, donor))
    # Its timeline starts there now: the donor's checkpoint stays pinned, and is what a
    # failure would restore, until its own retention lets go of it.
    assert m.iteration == 4 and donor.key in m.pinned and m.latest_checkpoint == donor
    assert isinstance(actions[0], RunStarted) and actions[0].iteration == 4


def test_an_exploit_is_a_restore_with_a_new_config() -> None:
    """The scheduler's public ``Exploit`` keeps its fields and is core's restore."""
    exploit = Exploit("a", "b", ckpt(3, trial="b"), {"lr": 1.0})
    assert isinstance(exploit, RestoreFrom)
    assert (exploit.trial_id, exploit.donor_id, exploit.config) == ("a", "b", {"lr": 1.0})
    assert exploit == Exploit("a", "b", ckpt(3, trial="b"), {"lr": 1.0})
    assert exploit != RestoreFrom("a", ckpt(3, trial="b"), {"lr": 1.0})


# -- a user's stop and a scheduler's Stop ---------------------------------------------------


@pytest.mark.parametrize("every", [0, 1, 5])
def test_a_users_stop_and_a_schedulers_stop_are_carried_out_alike(every: int) -> None:
    """At iteration 2: a scheduler's Stop on the result, the stop criterion met by it,
    and a user's stop of the trial held at that result: after the result's report, the
    same actions, and the same ones again once the final save is persisted."""
    by_scheduler = running(checkpoint_every=every, judge=DecidesAt(2))
    by_criterion = running(checkpoint_every=every, stop={"training_iteration": 2})
    by_user = running(checkpoint_every=every, judge=DecidesAt(2, Hold("t")))
    trials = (by_scheduler, by_criterion, by_user)
    for m in trials:
        result(m)
        if m.saves_in_flight:
            m.handle(SaveDone(m.generation, ckpt(1)))
    scheduler_said = result(by_scheduler)[1:]
    criterion_said = result(by_criterion)[1:]
    user_said = result(by_user)[1:] + by_user.handle(Decided(Stop("t")))
    assert scheduler_said == criterion_said == user_said
    expected = ["StopActor", "Notify"] if every == 0 else ["Save", "ArmGrace"]
    assert kinds(scheduler_said) == expected
    if every:
        done = [m.handle(SaveDone(m.generation, ckpt(2))) for m in trials]
        assert done[0] == done[1] == done[2]
        assert kinds(done[0])[-2:] == ["StopActor", "Notify"]
    assert by_scheduler.state is by_criterion.state is by_user.state is TrialState.TERMINATED


@pytest.mark.parametrize("who", ["scheduler", "criterion", "user", "function"])
def test_a_failure_after_a_stop_was_decided_ends_the_trial_terminated(who: str) -> None:
    """Whoever decided the stop, a failure while its final save is in flight ends the
    trial TERMINATED (it used to restart the trial for a scheduler or its criterion,
    only to reach the same decision again)."""
    judge = {"scheduler": DecidesAt(3), "criterion": StopJudge(StopCondition("t", {"it": 3}))}
    m = running(checkpoint_every=10, max_failures=3, judge=judge.get(who, StopsAt(99)))
    result(m)
    result(m)
    if who == "user":
        m.handle(Decided(Stop("t")))
    if who == "function":  # its function returned
        asked = m.handle(TrainResult(m.generation, ({FUNCTION_DONE: True},)))
    else:
        asked = result(m, it=3)
    assert "Save" in kinds(asked)  # the final save, in flight
    actions = m.handle(Failure(m.generation, RuntimeError("node lost"), actor_died=True))
    assert m.state is TrialState.TERMINATED, who
    assert "StartActor" not in kinds(actions) and kinds(actions)[-1] == "Notify"
    assert m.num_failures == 1 and m.errors[0].args == ("node lost",)


def test_a_stop_at_once_drops_what_is_in_flight_and_saves_nothing() -> None:
    """``Stop(at_once=True)`` (a sweep's fail_fast): TERMINATED now, the busy actor let
    go ungracefully, no final save although the trial checkpoints, and the result of the
    step that was in flight, arriving after, is not recorded."""
    m = running(checkpoint_every=1)
    gen = m.generation
    actions = m.handle(Decided(Stop("t", at_once=True)))  # its first step is in flight
    assert kinds(actions) == ["StopActor", "Notify"] and m.state is TrialState.TERMINATED
    assert actions[0].graceful is False  # type: ignore[attr-defined]
    assert m.handle(TrainResult(gen, ({"loss": 1.0},))) == [] and m.iteration == 0
    # An idle (held) trial goes gracefully (its process may serve again), and without
    # the final save a plain stop would make.
    idle, plain = (running(checkpoint_every=5, judge=DecidesAt(1, Hold("t"))) for _ in "ab")
    assert kinds(result(idle)) == kinds(result(plain)) == ["Report"]  # held: no next step
    assert kinds(plain.handle(Decided(Stop("t"))))[0] == "Save"
    actions = idle.handle(Decided(Stop("t", at_once=True)))
    assert kinds(actions) == ["StopActor", "Notify"] and actions[0].graceful  # type: ignore[attr-defined]


def test_a_stop_decided_while_a_new_config_is_refused_settles_the_trial() -> None:
    """The trainable refused a restore's new config in place while a stop was pending:
    the trial stops instead of starting a new actor that would forget the stop."""
    m = running()
    m.handle(Decided(RestoreFrom("t", ckpt(1), {"lr": 0.1})))
    result(m)
    assert m.state is TrialState.RESTORING
    assert kinds(m.handle(Decided(Stop("t")))) == ["ArmGrace"]
    actions = m.handle(ConfigRefused(m.generation, ckpt(1)))
    assert kinds(actions) == ["StopActor", "Notify"] and m.state is TrialState.TERMINATED


# -- policies are built once -------------------------------------------------------------------


def test_a_policy_cannot_be_patched_after_it_is_built() -> None:
    required = {"loss": "the sweep's metric"}
    policy = TrialPolicy(
        judge=Judges([StopJudge(StopCondition("t", None))]), required_metrics=required
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.judge = StopsAt(1)  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.hook_progress = None  # type: ignore[misc]
    with pytest.raises(TypeError):
        policy.required_metrics["acc"] = "mine"  # type: ignore[index]
    required["acc"] = "changed after"  # the caller's dict is not the policy's
    assert dict(policy.required_metrics) == {"loss": "the sweep's metric"}
    judges = policy.judge
    assert isinstance(judges, Judges)
    with pytest.raises(dataclasses.FrozenInstanceError):
        judges.judges = ()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        judges.judges[0].stop = StopCondition("t", {"x": 1})  # type: ignore[attr-defined]


def test_a_rebuilt_machine_keeps_its_record_and_takes_the_new_policy() -> None:
    m = running(checkpoint_every=1)
    result(m)
    m.handle(SaveDone(m.generation, ckpt(1)))
    judge = StopsAt(2)
    rebuilt = m.rebuilt(TrialPolicy(checkpoint_every=1, judge=judge))
    assert rebuilt.policy.judge is judge and m.policy.judge is not judge
    assert (rebuilt.state, rebuilt.iteration, rebuilt.checkpoints) == (
        m.state,
        m.iteration,
        m.checkpoints,
    )
    result(rebuilt)
    assert judge.seen == [2] and rebuilt.state is TrialState.RUNNING and rebuilt.intent
