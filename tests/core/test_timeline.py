"""A trial's timeline: checkpoints newer than the point a run restarted from are on no
timeline, and are never restored, named as the latest, or kept by retention. The state
machine driven by hand (no Ray, no asyncio), for every path that starts a run: a
failure's restart, a rollback, an exploit, pause and resume, a resumed machine."""

from __future__ import annotations

from typing import Any

from orchestrator.core.checkpoints import Checkpoint, RetentionPolicy
from orchestrator.core.decisions import Decision, Pause, RestoreFrom, Resume
from orchestrator.core.events import (
    Action,
    ActorReady,
    Decided,
    DeleteCheckpoints,
    Failure,
    Launch,
    ReleaseCheckpoint,
    Restore,
    RestoreDone,
    RunStarted,
    SaveDone,
    StartActor,
    TrainResult,
)
from orchestrator.core.machine import TrialMachine, TrialPolicy, TrialState


def ckpt(iteration: int, trial: str = "t", suffix: str = "") -> Checkpoint:
    key = f"{trial}/checkpoint_{iteration:06d}{suffix}"
    return Checkpoint(trial, iteration, key, "file:///x/" + key, metrics={"it": iteration})


def running(**policy: Any) -> TrialMachine:
    policy.setdefault("checkpoint_every", 10)
    policy.setdefault("max_failures", 3)
    m = TrialMachine("t", TrialPolicy(**policy))
    m.handle(Launch())
    m.handle(ActorReady(m.generation))
    assert m.state is TrialState.RUNNING
    return m


def train_to(m: TrialMachine, iteration: int, suffix: str = "") -> list[Action]:
    """Results up to ``iteration``, each due save persisted at once (``suffix`` names
    a save of an iteration the trial saved before, as the loop's keys do)."""
    actions: list[Action] = []
    while m.iteration < iteration:
        actions += m.handle(TrainResult(m.generation, ({"x": 1},)))
        if m.saves_in_flight:
            actions += m.handle(SaveDone(m.generation, ckpt(m.iteration, suffix=suffix)))
    return actions


def roll_back(m: TrialMachine, target: Checkpoint, config: Any = None) -> list[Action]:
    """A restore requested while RUNNING, carried out once the step in flight is back."""
    m.handle(Decided(RestoreFrom("t", target, config)))
    actions = m.handle(TrainResult(m.generation, ({"x": 1},)))
    assert any(isinstance(a, Restore) for a in actions), actions
    return actions + m.handle(RestoreDone(m.generation, target))


def restart_target(m: TrialMachine, actions: list[Action]) -> Checkpoint | None:
    """Where the new actor started after a failure goes."""
    assert any(isinstance(a, StartActor) for a in actions), actions
    restore = [a for a in m.handle(ActorReady(m.generation)) if isinstance(a, Restore)]
    return restore[0].checkpoint if restore else None


def deleted(actions: list[Action]) -> list[str]:
    return [c.key for a in actions if isinstance(a, DeleteCheckpoints) for c in a.checkpoints]


def iterations(checkpoints: list[Checkpoint]) -> list[int]:
    return [c.iteration for c in checkpoints]


def test_a_crash_after_a_rollback_restores_the_rollback_point() -> None:
    """The issue's case: restore(20) at about 45, then a crash at 25."""
    m = running()
    train_to(m, 45)
    assert iterations(m.checkpoints) == [10, 20, 30, 40]
    actions = roll_back(m, m.checkpoints[1])
    started = [a for a in actions if isinstance(a, RunStarted)]
    assert [a.iteration for a in started] == [20]
    # Right after the rollback: 30 and 40 are off the timeline, and go.
    assert m.latest_checkpoint == ckpt(20)
    assert iterations(m.checkpoints) == [10, 20]
    assert deleted(actions) == [ckpt(30).key, ckpt(40).key]
    train_to(m, 24)
    failed = m.handle(Failure(m.generation, RuntimeError("crash at 25")))
    assert restart_target(m, failed) == ckpt(20)


def test_a_rolled_back_run_saves_its_iterations_again_on_the_timeline() -> None:
    m = running()
    train_to(m, 45)
    roll_back(m, ckpt(20))
    train_to(m, 45, suffix=".1")
    assert [c.key for c in m.checkpoints] == [
        ckpt(10).key,
        ckpt(20).key,
        ckpt(30, suffix=".1").key,
        ckpt(40, suffix=".1").key,
    ]
    failed = m.handle(Failure(m.generation, RuntimeError("crash")))
    assert restart_target(m, failed) == ckpt(40, suffix=".1")


def test_retention_after_a_rollback_keeps_the_new_run_not_the_abandoned_one() -> None:
    m = running(retention=RetentionPolicy(keep=2))
    train_to(m, 45)
    roll_back(m, ckpt(30))
    assert iterations(m.checkpoints) == [30]
    actions = train_to(m, 35, suffix=".1")
    actions += train_to(m, 40, suffix=".1")
    assert [c.key for c in m.checkpoints] == [ckpt(30).key, ckpt(40, suffix=".1").key]
    assert deleted(actions) == []
    actions = train_to(m, 50, suffix=".1")
    assert deleted(actions) == [ckpt(30).key]
    assert m.latest_checkpoint == ckpt(50, suffix=".1")


def test_an_exploit_leaves_the_trials_own_line_and_a_crash_restores_the_donors_state() -> None:
    """PBT's exploit is ``restore(donor's checkpoint, config=...)``: the clone's own
    checkpoints hold the state it gave up, and the donor's is never its to delete."""
    m = running()
    train_to(m, 45)
    donor = ckpt(20, trial="donor")
    actions = roll_back(m, donor, {"lr": 0.5})
    assert deleted(actions) == [ckpt(i).key for i in (10, 20, 30, 40)]
    assert m.checkpoints == [] and m.origin == donor and m.latest_checkpoint == donor
    assert donor.key in m.pinned  # the donor's retention waits for the clone
    train_to(m, 24)
    failed = m.handle(Failure(m.generation, RuntimeError("crash at 25")))
    assert restart_target(m, failed) == donor
    m.handle(RestoreDone(m.generation, donor))
    assert m.origin == donor  # restarting from its origin keeps the timeline as it was


def test_retention_lets_go_of_another_trials_checkpoint_without_deleting_it() -> None:
    m = running(retention=RetentionPolicy(keep=1))
    train_to(m, 15)
    donor = ckpt(20, trial="donor")
    roll_back(m, donor, {"lr": 0.5})
    actions = train_to(m, 30)
    assert deleted(actions) == []
    released = [a.checkpoint for a in actions if isinstance(a, ReleaseCheckpoint)]
    assert released == [donor]
    assert m.origin is None and donor.key not in m.pinned
    assert iterations(m.checkpoints) == [30]


def test_a_second_exploit_lets_go_of_the_first_donors_checkpoint() -> None:
    m = running()
    train_to(m, 15)
    first, second = ckpt(20, trial="a"), ckpt(30, trial="b")
    roll_back(m, first, {"lr": 0.5})
    train_to(m, 25)
    actions = roll_back(m, second, {"lr": 0.1})
    assert [a.checkpoint for a in actions if isinstance(a, ReleaseCheckpoint)] == [first]
    assert deleted(actions) == []  # it saved nothing of its own on the first line
    assert m.origin == second


def test_restoring_a_trials_own_checkpoint_keeps_the_checkpoints_before_it() -> None:
    m = running()
    train_to(m, 45)
    donor = ckpt(20, trial="donor")
    roll_back(m, donor, {"lr": 0.5})
    train_to(m, 45)
    actions = roll_back(m, ckpt(30))
    assert deleted(actions) == [ckpt(40).key]
    assert m.origin == donor and iterations(m.timeline) == [20, 30]


def test_pause_and_resume_after_a_rollback_continue_on_the_timeline() -> None:
    """Without a save on pause (a function trainable), resume loads the newest
    checkpoint: the rollback's, never the abandoned run's."""
    for start in (ckpt(20), ckpt(20, trial="donor")):
        m = running(saves_on_demand=False)
        train_to(m, 45)
        roll_back(m, start)
        train_to(m, 24)
        m.handle(Decided(Pause("t")))
        m.handle(TrainResult(m.generation, ({"x": 1},)))
        assert m.state is TrialState.PAUSED
        resumed = m.handle(Decided(Resume("t")))
        assert restart_target(m, resumed) == start


def test_an_actor_that_dies_during_a_rollback_restarts_at_the_rollback_point() -> None:
    m = running()
    train_to(m, 45)
    m.handle(Decided(RestoreFrom("t", ckpt(20))))
    m.handle(TrainResult(m.generation, ({"x": 1},)))
    assert m.state is TrialState.RESTORING
    failed = m.handle(Failure(m.generation, RuntimeError("node lost"), actor_died=True))
    assert restart_target(m, failed) == ckpt(20)
    m.handle(RestoreDone(m.generation, ckpt(20)))
    assert iterations(m.checkpoints) == [10, 20]


def test_a_load_failure_during_a_rollback_keeps_the_timeline_it_was_on() -> None:
    """The run from 20 never started, so nothing was abandoned yet: the trial goes on
    from its newest checkpoint, as a failure does."""
    m = running()
    train_to(m, 45)
    m.handle(Decided(RestoreFrom("t", ckpt(20))))
    m.handle(TrainResult(m.generation, ({"x": 1},)))
    failed = m.handle(Failure(m.generation, OSError("corrupt"), actor_died=False))
    assert restart_target(m, failed) == ckpt(40)


def test_dropped_checkpoints_say_why() -> None:
    m = running(retention=RetentionPolicy(keep=3))
    train_to(m, 45)
    roll_back(m, ckpt(20))
    assert "keep_checkpoints=3" in m.dropped[ckpt(10).key]
    assert "restarted from iteration 20" in m.dropped[ckpt(40).key]
    assert ckpt(20).key not in m.dropped


def test_a_resumed_machine_starts_from_its_journaled_origin() -> None:
    donor = ckpt(20, trial="donor")
    m = TrialMachine.resumed(
        "t",
        TrialPolicy(checkpoint_every=10),
        state=TrialState.RUNNING,
        checkpoints=[],
        num_failures=0,
        iteration=20,
        error=None,
        origin=donor,
    )
    assert m.latest_checkpoint == donor and donor.key in m.pinned
    assert restart_target(m, m.handle(Launch())) == donor


class ExploitsAt:
    """A stub judge as PBT's exploit reaches the machine: a restore with a new config at ``at``."""

    def __init__(self, at: int, donor: Checkpoint) -> None:
        self.at, self.donor = at, donor

    def judge(self, result: dict[str, Any]) -> Decision | None:
        if result["training_iteration"] == self.at:
            return RestoreFrom("t", self.donor, {"lr": 0.5})
        return None

    def next_decision_at(self, iteration: int) -> int | None:
        return self.at if iteration < self.at else None


def test_a_pbt_exploit_decided_by_the_judge_follows_the_same_rule() -> None:
    donor = ckpt(20, trial="donor")
    m = running(judge=ExploitsAt(45, donor))
    actions = train_to(m, 45)
    assert any(isinstance(a, Restore) and a.checkpoint == donor for a in actions)
    actions = m.handle(RestoreDone(m.generation, donor))
    assert deleted(actions) == [ckpt(i).key for i in (10, 20, 30, 40)]
    assert m.latest_checkpoint == donor and m.iteration == 20
    train_to(m, 24)
    failed = m.handle(Failure(m.generation, RuntimeError("crash at 25"), actor_died=True))
    assert restart_target(m, failed) == donor
