"""The trial state machine, driven by hand: no Ray, no asyncio."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from orchestrator.core.backoff import Backoff
from orchestrator.core.checkpoints import RetentionPolicy
from orchestrator.core.decisions import (
    Pause,
    RestoreFrom,
    Resume,
    Stop,
)
from orchestrator.core.events import (
    ActorReady,
    CheckpointUnavailable,
    Decided,
    DeleteCheckpoints,
    Failure,
    Launch,
    Notify,
    Report,
    Restore,
    RestoreDone,
    RunStarted,
    Save,
    SaveDone,
    SaveFailed,
    SaveRequested,
    StartActor,
    StopActor,
    Train,
    TrainResult,
)
from orchestrator.core.judge import StopJudge
from orchestrator.core.machine import (
    TrialMachine,
    TrialPolicy,
    TrialState,
)
from orchestrator.core.stopping import StopCondition
from orchestrator.errors import InvalidTransition

from ..support.machines import ckpt, kinds, machine, result, running

# -- the happy path ---------------------------------------------------------------------


def test_launch_starts_actor_with_its_first_call_behind_the_setup() -> None:
    """A fresh start's first train call goes with the setup (issue 36: no round trip
    between a trial's setup and its first step); the actor's readiness asks no more."""
    m = machine()
    actions = m.handle(Launch())
    assert kinds(actions) == ["StartActor", "Notify"]
    assert actions[0].train == Train(1, 1, None, run_on=True)  # no judge: it may run on
    assert m.state is TrialState.STARTING and m.train_in_flight
    actions = m.handle(ActorReady(1))
    assert m.state is TrialState.RUNNING
    assert kinds(actions) == ["RunStarted"]
    assert kinds(result(m)) == ["Report", "Train"]


def test_a_restart_with_a_checkpoint_restores_before_its_first_call() -> None:
    m = running(max_failures=3, checkpoint_every=1)
    result(m)
    m.handle(SaveDone(m.generation, ckpt(1)))
    actions = m.handle(Failure(m.generation, RuntimeError("boom")))
    (start,) = [a for a in actions if isinstance(a, StartActor)]
    assert start.train is None and not m.train_in_flight
    assert kinds(m.handle(ActorReady(m.generation))) == ["Restore"]


def test_a_stop_before_the_actor_is_ready_settles_at_once_and_its_first_call_is_stale() -> None:
    m = machine()
    m.handle(Launch())
    actions = m.handle(Decided(Stop("t")))
    assert kinds(actions) == ["StopActor", "Notify"] and actions[0].graceful
    assert m.state is TrialState.TERMINATED and not m.train_in_flight
    assert result(m) == [] and m.iteration == 0  # the first call's answer: dropped


def test_a_restore_asked_while_the_first_call_is_in_flight_follows_it() -> None:
    """The first call went with the setup: a restore decided before the actor is ready
    waits for that call, as one decided while a trial runs does."""
    m = machine()
    m.handle(Launch())
    assert m.handle(Decided(RestoreFrom("t", ckpt(4)))) == []
    assert kinds(m.handle(ActorReady(m.generation))) == ["RunStarted"]
    actions = result(m)
    assert m.state is TrialState.RESTORING
    assert [a.checkpoint.iteration for a in actions if isinstance(a, Restore)] == [4]


def test_results_are_numbered_and_stop_at_threshold() -> None:
    m = running(stop={"training_iteration": 3})
    for i in (1, 2):
        actions = result(m, loss=1.0)
        assert isinstance(actions[0], Report)
        assert actions[0].result["training_iteration"] == i
        assert actions[0].result["trial_id"] == "t"
        assert isinstance(actions[-1], Train)
    actions = result(m, loss=0.5)
    assert kinds(actions) == ["Report", "StopActor", "Notify"]
    assert m.state is TrialState.TERMINATED


def test_results_of_the_same_names_share_their_keys() -> None:
    """A result arrives with keys of its own (deserialised): the record's copy shares
    one table of keys with the other results of the same names (issue 36: a finished
    trial keeps its last result for the whole experiment), at about half a plain dict's
    bytes. It is a plain dict otherwise: values, order, a key that is not a string."""
    m = running()
    reports: list[dict[str, Any]] = []
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(200):
            name = "".join(["lo", "ss"])  # a string of its own, as a deserialised key is
            (report, *_) = m.handle(TrainResult(m.generation, ({name: 0.5 + i, "n": 1.5},)))
            assert isinstance(report, Report)
            reports.append(report.result)
        held = (tracemalloc.get_traced_memory()[0] - before) / len(reports)
        plain = [dict(r) for r in reports]
        held_plain = (tracemalloc.get_traced_memory()[0] - before) / len(reports) - held
    finally:
        tracemalloc.stop()
    assert held < 0.7 * held_plain, f"{held:.0f} bytes a result, {held_plain:.0f} as plain dicts"
    assert plain[0] == reports[0] and type(reports[0]) is dict
    assert list(reports[3].items()) == [
        ("loss", 3.5),
        ("n", 1.5),
        ("training_iteration", 4),
        ("trial_id", "t"),
    ]
    reports[0]["extra"] = 1  # a dict of its own from then on; the others unchanged
    del reports[1]["n"]
    assert reports[0]["extra"] == 1 and "extra" not in reports[2]
    assert list(reports[1]) == ["loss", "training_iteration", "trial_id"]
    (odd, *_) = m.handle(TrainResult(m.generation, ({7: "x", "loss": 1.0},)))
    assert isinstance(odd, Report) and odd.result[7] == "x" and odd.result["loss"] == 1.0


def test_save_is_pipelined_with_the_next_step() -> None:
    m = running(checkpoint_every=2)
    result(m)
    actions = result(m)
    assert kinds(actions) == ["Report", "Save", "Train"]
    assert m.saves_in_flight == 1 and m.train_in_flight


def test_final_save_before_terminating_and_waits_for_it() -> None:
    m = running(checkpoint_every=10, stop={"training_iteration": 3})
    result(m)
    result(m)
    actions = result(m)
    # Waits for the save to persist (a grace period, as for any stop: should it hang).
    assert kinds(actions) == ["Report", "Save", "ArmGrace"]
    assert m.state is TrialState.RUNNING
    actions = m.handle(SaveDone(m.generation, ckpt(3)))
    assert "StopActor" in kinds(actions)
    assert m.state is TrialState.TERMINATED
    assert [c.iteration for c in m.checkpoints] == [3]


def test_retention_keeps_newest_and_deletes_older() -> None:
    m = running(checkpoint_every=1, retention=RetentionPolicy(keep=2))
    deleted: list[int] = []
    for i in range(1, 6):
        result(m)
        for a in m.handle(SaveDone(m.generation, ckpt(i))):
            if isinstance(a, DeleteCheckpoints):
                deleted += [c.iteration for c in a.checkpoints]
    assert [c.iteration for c in m.checkpoints] == [4, 5]
    assert deleted == [1, 2, 3]


def test_retention_by_score_always_keeps_newest() -> None:
    policy = RetentionPolicy(keep=1, score=("acc", "max"))
    ckpts = [ckpt(1, acc=0.9), ckpt(2, acc=0.5), ckpt(3, acc=0.1)]
    doomed = policy.plan_deletions(ckpts)
    assert [c.iteration for c in doomed] == [2]  # keeps the best (1) and the newest (3)


def test_retention_never_deletes_pinned() -> None:
    policy = RetentionPolicy(keep=1)
    ckpts = [ckpt(1), ckpt(2), ckpt(3)]
    doomed = policy.plan_deletions(ckpts, pinned=frozenset({ckpts[0].key}))
    assert [c.iteration for c in doomed] == [2]


# -- failures --------------------------------------------------------------------------


def test_failure_restores_newest_checkpoint_within_budget() -> None:
    m = running(checkpoint_every=2, max_failures=1)
    result(m)
    result(m)
    m.handle(SaveDone(m.generation, ckpt(2)))
    result(m)
    actions = m.handle(Failure(m.generation, RuntimeError("boom"), actor_died=True))
    assert kinds(actions) == ["StopActor", "Notify", "StartActor"]
    assert m.state is TrialState.STARTING and m.generation == 2
    actions = m.handle(ActorReady(2))
    assert kinds(actions) == ["Restore"] and actions[0].checkpoint.iteration == 2
    actions = m.handle(RestoreDone(2, ckpt(2)))
    assert isinstance(actions[0], RunStarted) and actions[0].iteration == 2
    assert m.iteration == 2
    assert m.num_failures == 1


def test_failure_past_budget_is_error_with_cause() -> None:
    m = running(max_failures=0)
    err = ValueError("bad")
    actions = m.handle(Failure(m.generation, err))
    assert m.state is TrialState.ERROR
    assert m.error is err
    assert kinds(actions) == ["StopActor", "Notify"]


def test_unlimited_failures() -> None:
    m = running(max_failures=-1)
    for _ in range(20):
        m.handle(Failure(m.generation, RuntimeError("x"), actor_died=True))
        m.handle(ActorReady(m.generation))
    assert m.state is TrialState.RUNNING and m.num_failures == 20


def test_stale_events_from_replaced_actor_are_dropped() -> None:
    m = running(max_failures=2)
    old = m.generation
    m.handle(Failure(old, RuntimeError("x"), actor_died=True))
    assert m.handle(TrainResult(old, ({"a": 1},))) == []
    assert m.handle(SaveDone(old, ckpt(5))) == []
    assert m.checkpoints == []


def test_failed_load_falls_back_to_previous_checkpoint() -> None:
    m = running(checkpoint_every=1, max_failures=3)
    for i in (1, 2):
        result(m)
        m.handle(SaveDone(m.generation, ckpt(i)))
    m.handle(Failure(m.generation, RuntimeError("died"), actor_died=True))
    m.handle(ActorReady(m.generation))
    assert m.state is TrialState.RESTORING and m.restore_target is not None
    assert m.restore_target.iteration == 2
    m.handle(Failure(m.generation, OSError("corrupt"), actor_died=False))
    actions = m.handle(ActorReady(m.generation))
    assert isinstance(actions[0], Restore) and actions[0].checkpoint is not None
    assert actions[0].checkpoint.iteration == 1


def test_unloadable_checkpoints_fall_back_then_error_unless_scratch_allowed() -> None:
    for scratch in (False, True):
        m = running(checkpoint_every=1, max_failures=2, fallback_to_scratch=scratch)
        result(m)
        m.handle(SaveDone(m.generation, ckpt(1)))
        m.handle(Failure(m.generation, RuntimeError("died"), actor_died=True))
        m.handle(ActorReady(m.generation))
        actions = m.handle(Failure(m.generation, OSError("corrupt"), actor_died=False))
        if scratch:
            assert kinds(actions)[-1] == "StartActor"
            m.handle(ActorReady(m.generation))
            assert m.state is TrialState.RUNNING and m.iteration == 0
        else:
            assert m.state is TrialState.ERROR
            assert "fallback_to_scratch=True" in str(m.error)


def test_load_failure_with_an_older_checkpoint_costs_no_budget() -> None:
    m = running(checkpoint_every=1, max_failures=1)
    for i in (1, 2):
        result(m)
        m.handle(SaveDone(m.generation, ckpt(i)))
    m.handle(Failure(m.generation, RuntimeError("died"), actor_died=True))  # budget used
    m.handle(ActorReady(m.generation))
    m.handle(Failure(m.generation, OSError("corrupt"), actor_died=False))  # falls back
    assert m.state is TrialState.STARTING
    m.handle(ActorReady(m.generation))
    m.handle(RestoreDone(m.generation, ckpt(1)))
    assert m.state is TrialState.RUNNING and m.iteration == 1 and m.num_failures == 2


def test_unreachable_checkpoints_fall_back_with_the_same_actor() -> None:
    m = running(checkpoint_every=1, max_failures=1)
    for i in (1, 2):
        result(m)
        m.handle(SaveDone(m.generation, ckpt(i)))
    m.handle(Failure(m.generation, RuntimeError("node died"), actor_died=True))
    m.handle(ActorReady(m.generation))
    gen = m.generation
    actions = m.handle(CheckpointUnavailable(gen, ckpt(2), OSError("node gone")))
    assert kinds(actions) == ["Restore"] and actions[0].checkpoint.iteration == 1
    assert m.generation == gen  # no new actor
    actions = m.handle(CheckpointUnavailable(gen, ckpt(1), OSError("node gone")))
    assert m.state is TrialState.ERROR
    assert "no checkpoint can reach its new actor" in str(m.error)
    assert kinds(actions) == ["StopActor", "Notify"]


def test_save_that_cannot_be_persisted_pauses_with_the_error() -> None:
    m = running(checkpoint_every=2)
    result(m)
    result(m)  # asks for a save, and trains on
    err = OSError("storage unreachable for 300 s")
    actions = m.handle(SaveFailed(m.generation, 2, err))
    assert kinds(actions) == ["Notify"]  # waits for the step in flight
    assert m.state is TrialState.RUNNING
    actions = result(m)
    assert "Save" not in kinds(actions)  # storage is down: no final save
    assert m.state is TrialState.PAUSED and m.error is err
    m.handle(Decided(Resume("t")))
    assert m.error is None and m.state is TrialState.STARTING


def test_a_save_dropped_with_storage_fine_lets_the_trial_train_on_and_save_again() -> None:
    """A save whose reused blob was collected meanwhile (``BlobCollected``): no pause, no
    error state; the next checkpoint is saved as usual."""
    m = running(checkpoint_every=2, stop={"training_iteration": 6})
    result(m)
    result(m)  # asks for a save, and trains on
    dropped = OSError("blob collected while the save ran")
    assert m.handle(SaveFailed(m.generation, 2, dropped, trains_on=True)) == []
    result(m)
    assert kinds(result(m)) == ["Report", "Save", "Train"]  # saves again at iteration 4
    m.handle(SaveDone(m.generation, ckpt(4)))
    assert m.state is TrialState.RUNNING and m.error is None
    assert [c.iteration for c in m.checkpoints] == [4] and m.errors == [dropped]
    # Training that waited for the dropped save goes on.
    m = running(checkpoint_every=1, max_pending_saves=0)
    assert kinds(result(m)) == ["Report", "Save"]
    assert kinds(m.handle(SaveFailed(m.generation, 1, dropped, trains_on=True))) == ["Train"]


def test_a_second_save_failing_in_flight_is_not_news_again() -> None:
    """With saves in flight when the first fails, the trial pauses with the first error,
    said once; the later ones are kept in ``errors``."""
    m = running(checkpoint_every=1)
    result(m)
    result(m)  # two saves asked for, training on
    first, second = OSError("disk full at 1"), OSError("disk full at 2")
    assert kinds(m.handle(SaveFailed(m.generation, 1, first))) == ["Notify"]
    assert kinds(m.handle(SaveFailed(m.generation, 2, second))) == []
    result(m)
    assert m.state is TrialState.PAUSED and m.error is first
    assert m.errors == [first, second]


def test_backoff_grows_between_consecutive_failures() -> None:
    m = running(max_failures=-1, restart_backoff=Backoff(1.0, 5.0))
    delays = []
    for _ in range(5):
        actions = m.handle(Failure(m.generation, RuntimeError("x"), actor_died=True))
        delays.append(next(a.delay for a in actions if isinstance(a, StartActor)))
        m.handle(ActorReady(m.generation))
    assert delays == [0.0, 1.0, 2.0, 4.0, 5.0]  # the first restart is at once
    result(m)  # a result resets the back-off
    actions = m.handle(Failure(m.generation, RuntimeError("x"), actor_died=True))
    assert next(a.delay for a in actions if isinstance(a, StartActor)) == 0.0


# -- requests --------------------------------------------------------------------------


def test_pause_saves_then_releases() -> None:
    m = running(checkpoint_every=0)
    result(m)
    # a step is in flight: wait for it (a grace period, should it never return)
    assert kinds(m.handle(Decided(Pause("t")))) == ["ArmGrace"]
    actions = result(m)
    assert kinds(actions) == ["Report", "Save"]
    actions = m.handle(SaveDone(m.generation, ckpt(2)))
    assert m.state is TrialState.PAUSED
    assert "StopActor" in kinds(actions)
    actions = m.handle(Decided(Resume("t")))
    assert kinds(actions) == ["StartActor"]
    m.handle(ActorReady(m.generation))
    m.handle(RestoreDone(m.generation, ckpt(2)))
    assert m.state is TrialState.RUNNING and m.iteration == 2


def test_resume_cancels_a_pending_pause() -> None:
    m = running()
    result(m)
    m.handle(Decided(Pause("t")))
    m.handle(Decided(Resume("t")))
    actions = result(m)
    assert kinds(actions) == ["Report", "Train"]


def test_resume_while_the_pause_save_is_in_flight_trains_on_beside_it() -> None:
    m = running(checkpoint_every=0)
    m.handle(Decided(Pause("t")))
    assert kinds(result(m)) == ["Report", "Save"]
    # The pause's save is still in flight: training goes on beside it, as after any save.
    assert kinds(m.handle(Decided(Resume("t")))) == ["Train"]
    actions = m.handle(SaveDone(m.generation, ckpt(1)))
    assert "Train" not in kinds(actions)  # one step in flight, not two
    assert m.state is TrialState.RUNNING and m.train_in_flight


def test_resume_while_the_pause_save_holds_training_waits_for_it() -> None:
    m = running(checkpoint_every=0, max_pending_saves=0)
    m.handle(Decided(Pause("t")))
    assert kinds(result(m)) == ["Report", "Save"]
    assert m.handle(Decided(Resume("t"))) == []  # with no save allowed in flight, it waits
    actions = m.handle(SaveDone(m.generation, ckpt(1)))
    assert kinds(actions)[-1] == "Train"
    assert m.state is TrialState.RUNNING and m.train_in_flight


def test_training_waits_when_too_many_saves_are_unpersisted() -> None:
    m = running(checkpoint_every=1, max_pending_saves=2)
    assert kinds(result(m)) == ["Report", "Save", "Train"]
    assert kinds(result(m)) == ["Report", "Save", "Train"]
    assert kinds(result(m)) == ["Report", "Save"]  # a third unpersisted one: wait
    assert m.saves_in_flight == 3 and not m.train_in_flight
    assert kinds(m.handle(SaveDone(m.generation, ckpt(1)))) == ["Notify", "Train"]
    assert kinds(result(m)) == ["Report", "Save"]  # iteration 4: three in flight again
    m.handle(SaveDone(m.generation, ckpt(2)))
    m.handle(SaveDone(m.generation, ckpt(3)))  # the step is in flight: no second one
    assert m.train_in_flight and m.saves_in_flight == 1


def test_max_pending_saves_zero_persists_each_checkpoint_before_training_on() -> None:
    m = running(checkpoint_every=2, max_pending_saves=0)
    assert kinds(result(m)) == ["Report", "Train"]
    assert kinds(result(m)) == ["Report", "Save"]
    assert kinds(m.handle(SaveDone(m.generation, ckpt(2))))[-1] == "Train"


def test_stop_while_training_waits_for_saves_settles_after_them() -> None:
    m = running(checkpoint_every=1, max_pending_saves=0, stop={"training_iteration": 10})
    result(m)  # saves 1 and waits
    assert kinds(m.handle(Decided(Stop("t")))) == ["ArmGrace"]
    actions = m.handle(SaveDone(m.generation, ckpt(1)))
    assert "StopActor" in kinds(actions) and "Train" not in kinds(actions)
    assert m.state is TrialState.TERMINATED


def test_restore_mid_run_rolls_back() -> None:
    m = running(checkpoint_every=2)
    for i in range(1, 5):
        result(m)
        if i % 2 == 0:
            m.handle(SaveDone(m.generation, ckpt(i)))
    target = m.checkpoints[0]
    assert m.handle(Decided(RestoreFrom("t", target))) == []  # waits for the step in flight
    actions = result(m)
    assert kinds(actions) == ["Report", "Restore"]
    assert m.state is TrialState.RESTORING and target.key in m.pinned
    actions = m.handle(RestoreDone(m.generation, target))
    assert isinstance(actions[0], RunStarted) and actions[0].iteration == 2
    assert kinds(actions)[-1] == "Train"
    assert m.iteration == 2 and not m.pinned


def test_restore_brings_terminated_trial_back() -> None:
    m = running(stop={"training_iteration": 1}, checkpoint_every=1)
    result(m)
    m.handle(SaveDone(m.generation, ckpt(1)))
    assert m.state is TrialState.TERMINATED
    actions = m.handle(Decided(RestoreFrom("t", m.checkpoints[0])))
    assert kinds(actions) == ["StartActor"]


def test_stop_while_starting_releases_actor() -> None:
    m = machine()
    m.handle(Launch())
    actions = m.handle(Decided(Stop("t")))
    assert kinds(actions) == ["StopActor", "Notify"]
    assert m.state is TrialState.TERMINATED


def test_stop_beats_restore_request() -> None:
    m = running()
    m.handle(Decided(Stop("t")))
    m.handle(Decided(RestoreFrom("t", ckpt(0))))
    result(m)
    assert m.state is TrialState.TERMINATED


def test_unrequested_save_result_is_refused() -> None:
    m = running()
    with pytest.raises(InvalidTransition, match="no save was asked for"):
        m.handle(SaveDone(m.generation, ckpt(1)))
    assert m.saves_in_flight == 0 and m.checkpoints == []


def test_invalid_transition_is_a_clear_error_and_changes_nothing() -> None:
    m = machine()
    with pytest.raises(InvalidTransition, match="trial t: event Launch"):
        m.handle(Launch()) and m.handle(Launch())
    before = (m.state, m.generation)
    with pytest.raises(InvalidTransition):
        m.handle(Launch())
    assert (m.state, m.generation) == before


def test_buffered_train_never_runs_past_checkpoint_or_limit() -> None:
    m = running(steps_per_call=10, checkpoint_every=4, stop={"training_iteration": 6})
    assert m.handle  # first Train asked in running()
    # iteration 0: next checkpoint at 4
    actions = m.handle(TrainResult(m.generation, tuple({"i": i} for i in range(4))))
    trains = [a for a in actions if isinstance(a, Train)]
    saves = [a for a in actions if isinstance(a, Save)]
    assert saves and saves[0].iteration == 4
    assert trains[0].steps == 2  # limit 6 comes before the next checkpoint at 8


def test_a_save_request_saves_right_after_the_next_result() -> None:
    m = running(checkpoint_every=0)
    assert m.handle(SaveRequested()) == []  # its step is in flight: the save follows it
    assert kinds(result(m, x=1)) == ["Report", "Save", "Train"]
    assert "Save" not in kinds(result(m, x=2))  # once
    function = running(checkpoint_every=0, saves_on_demand=False)
    function.handle(SaveRequested())
    assert "Save" not in kinds(result(function, x=1))  # it saves only what it reports


def test_notify_hooks_named_correctly() -> None:
    from orchestrator.engine.hooks import HOOK_NAMES

    m = running(max_failures=1, stop={"training_iteration": 1})
    names = set()
    for a in m.handle(Failure(m.generation, RuntimeError("x"))):
        if isinstance(a, Notify):
            names.add(a.hook)
    m.handle(ActorReady(m.generation))
    for a in result(m):
        if isinstance(a, Notify):
            names.add(a.hook)
    assert names <= set(HOOK_NAMES)
    assert {"on_trial_error", "on_trial_complete"} <= names


def test_stop_actor_after_failure_is_not_graceful() -> None:
    m = running(max_failures=1)
    actions = m.handle(Failure(m.generation, RuntimeError("x"), actor_died=True))
    stop = next(a for a in actions if isinstance(a, StopActor))
    assert stop.graceful is False


@pytest.mark.parametrize(
    "stop", [{"training_iteration": 3}, {"acc": 0.9}], ids=["iterations", "a metric"]
)
def test_a_run_restarted_where_its_stop_criterion_holds_trains_no_further(
    stop: dict[str, float],
) -> None:
    """A driver killed between a trial's last checkpoint and its end: resumed, the trial
    restores that checkpoint and ends there, not one step past its criterion."""
    last = ckpt(3, training_iteration=3, acc=0.95)
    m = TrialMachine.resumed(
        "t",
        TrialPolicy(checkpoint_every=1, judge=StopJudge(StopCondition("t", stop))),
        state=TrialState.RUNNING,  # as the killed driver's journal left it
        checkpoints=[ckpt(2, training_iteration=2, acc=0.8), last],
        num_failures=0,
        iteration=3,
        error=None,
    )
    m.handle(Launch())
    assert kinds(m.handle(ActorReady(m.generation))) == ["Restore"]
    actions = m.handle(RestoreDone(m.generation, last))
    assert "Train" not in kinds(actions) and "Save" not in kinds(actions)
    assert m.state is TrialState.TERMINATED and m.iteration == 3


def test_a_run_restarted_before_its_stop_criterion_holds_goes_on() -> None:
    early = ckpt(2, training_iteration=2, acc=0.8)
    m = running(checkpoint_every=1, stop={"training_iteration": 3, "acc": 0.9})
    m.handle(Decided(RestoreFrom("t", early)))
    result(m, training_iteration=1)
    m.handle(SaveDone(m.generation, ckpt(1)))
    actions = m.handle(RestoreDone(m.generation, early))
    assert "Train" in kinds(actions) and m.state is TrialState.RUNNING
