"""Function trainables: the wrapper driven by hand, the machine's handling of a
returned function, the trial actor running one in this process (no Ray), then function
trainables whose real worker processes are SIGKILLed. Whole experiments of function
trainables run on the fake Ray: ``tests/engine/test_function_run.py``."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ray import cloudpickle

from orchestrator import (
    Orchestrator,
    TrialState,
    get_checkpoint,
    report,
)
from orchestrator.actor import function as fmod
from orchestrator.actor.function import After, FunctionTrainable, is_function, wrap_function
from orchestrator.actor.trial_actor import TrialActor
from orchestrator.core.codec import class_path
from orchestrator.core.decisions import Pause
from orchestrator.core.events import Decided, Report, SaveDone, TrainResult
from orchestrator.core.spec import TrialSpec
from orchestrator.core.stopping import StopCondition
from orchestrator.core.wire import FUNCTION_DONE, REPORTED_CHECKPOINT
from orchestrator.errors import NotInTrial

from ..support.machines import ckpt, kinds, running
from ..support.trainables import (
    Counter,
    NotATrainable,
    assert_failure_free_history,
    async_counting,
    counting,
    kill_worker,
    never_reports,
    reports_a_list,
    reports_a_missing_checkpoint,
)

CPU = {"cpu": 0.25}


def plain(config: dict[str, Any]) -> None:
    report({"x": 1})


class CallableObject:
    def __call__(self, config: dict[str, Any]) -> None:
        report({"x": 1})


# -- what add_trial takes ------------------------------------------------------------------


def test_is_function_takes_callables_but_not_classes() -> None:
    assert is_function(plain) and is_function(async_counting) and is_function(lambda c: None)
    assert is_function(functools.partial(plain)) and is_function(CallableObject())
    assert not is_function(Counter) and not is_function(NotATrainable)
    assert not is_function(Counter()) and not is_function(42)


def test_the_wrapper_is_named_after_the_function_and_journals_by_value(tmp_path: Path) -> None:
    orch = Orchestrator(storage=tmp_path, name="spec")
    spec = orch.trial_spec(counting, {"epochs": 2})
    cls = spec.trainable
    assert cls.__name__ == "counting" and spec.trial_id.startswith("counting_")
    assert issubclass(cls, FunctionTrainable) and cls.saves_on_demand is False
    assert class_path(cls) is None  # not importable by a path: pickled by value
    data = json.loads(json.dumps(spec.to_json()))
    assert data["trainable"] is None and data["trainable_pickle"]
    loaded = TrialSpec.from_json(spec.trial_id, data, load_code=True).trainable
    assert issubclass(loaded, FunctionTrainable)
    assert loaded.__name__ == "counting" and loaded.function is counting


# -- the wrapper by hand ---------------------------------------------------------------------


@pytest.fixture
def host() -> Iterator[Callable[..., FunctionTrainable]]:
    """Builds a wrapped function the way a trial actor does; cleans them up after."""
    made: list[FunctionTrainable] = []

    def build(fn: Callable[..., Any], config: dict[str, Any] | None = None) -> FunctionTrainable:
        trainable = wrap_function(fn)()
        assert isinstance(trainable, FunctionTrainable)
        trainable.config, trainable.trial_id, trainable.iteration = dict(config or {}), "t", 0
        trainable.setup(trainable.config)
        made.append(trainable)
        return trainable

    yield build
    for trainable in made:
        trainable.cleanup()


def test_the_function_never_runs_ahead_of_step(host: Callable[..., FunctionTrainable]) -> None:
    seen: list[int] = []

    def train(config: dict[str, Any]) -> None:
        for i in range(3):
            seen.append(i)
            report({"i": i})

    t = host(train)
    assert seen == []  # setup starts nothing
    for i in range(3):
        assert t.step() == {"i": i}
        assert seen == list(range(i + 1))
    assert t.step() == {FUNCTION_DONE: True}


def test_a_batch_runs_in_the_functions_thread_until_told_to_stop(
    host: Callable[..., FunctionTrainable],
) -> None:
    """``step_batch``: each report is judged where it is made (no hand-off between
    reports), the function waits at the report that ended the call, and the next call
    goes on from there; an error of the judge ends the call, not the function."""
    threads: set[int] = set()
    ran: list[int] = []

    def train(config: dict[str, Any]) -> None:
        for i in range(1, 8):
            ran.append(i)
            report({"i": i})

    t = host(train)
    seen: list[tuple[int, bool]] = []

    def upto(n: int) -> Callable[[dict[str, Any], float], After]:
        def on_report(result: dict[str, Any], took: float) -> After:
            threads.add(threading.get_ident())
            assert took >= 0
            seen.append((result["i"], True))
            return After.MORE if result["i"] < n else After.WAIT

        return on_report

    assert t.step_batch(upto(3)) is None
    assert [i for i, _ in seen] == [1, 2, 3] and ran == [1, 2, 3]  # waits at report 3
    assert threads and threading.get_ident() not in threads  # judged in the function's
    assert t.step() == {"i": 4}  # one report per call again

    def broken(result: dict[str, Any], took: float) -> After:
        raise KeyError("the judge's")

    with pytest.raises(KeyError, match="the judge's"):
        t.step_batch(broken)
    assert ran == [1, 2, 3, 4, 5]  # report 5 was made; the function waits in it
    assert t.step_batch(upto(99)) == {FUNCTION_DONE: True}
    assert [i for i, _ in seen][-2:] == [6, 7]


def test_a_reported_checkpoint_is_taken_at_report_and_moved_by_save(
    host: Callable[..., FunctionTrainable], tmp_path: Path
) -> None:
    after_report: list[list[str]] = []
    inodes: list[int] = []

    def train(config: dict[str, Any]) -> None:
        d = tmp_path / "ckpt"
        d.mkdir()
        (d / "w.txt").write_text("weights")
        inodes.append((d / "w.txt").stat().st_ino)
        report({"loss": 0.5}, checkpoint=d)
        after_report.append(os.listdir(d))
        os.rmdir(d)  # the caller may delete it: it was left empty
        report({"loss": 0.4})

    t = host(train)
    result = t.step()
    assert result == {"loss": 0.5, REPORTED_CHECKPOINT: True}
    target = tmp_path / "saved"
    target.mkdir()
    t.save_checkpoint(str(target))
    assert (target / "w.txt").read_text() == "weights"
    assert (target / "w.txt").stat().st_ino == inodes[0]  # moved twice, never copied
    assert t.step() == {"loss": 0.4}  # no checkpoint with this one
    assert after_report == [[]]
    with pytest.raises(RuntimeError, match="reported no checkpoint"):
        t.save_checkpoint(str(target))


def test_load_checkpoint_mid_run_unwinds_and_restarts_from_it(
    host: Callable[..., FunctionTrainable], tmp_path: Path
) -> None:
    runs: list[str] = []

    def train(config: dict[str, Any]) -> None:
        ckpt = get_checkpoint()
        runs.append("fresh" if ckpt is None else Path(ckpt, "state").read_text())
        try:
            while True:
                report({"lr": config["lr"]})
        except Exception:  # an unwinding is not an Exception: it passes through
            runs.append("caught")
        finally:
            runs.append("finally")

    t = host(train, {"lr": 1})
    assert t.step() == {"lr": 1}
    source = tmp_path / "restore"
    source.mkdir()
    (source / "state").write_text("from 7")
    assert t.reset_config({"lr": 2}) is True  # an exploit is taken in place
    t.config = {"lr": 2}
    t.load_checkpoint(str(source))
    assert runs == ["fresh", "finally"]
    (source / "state").unlink()  # what the actor does once load returns
    source.rmdir()
    assert t.step() == {"lr": 2}
    assert runs == ["fresh", "finally", "from 7"]


async def _async_train(config: dict[str, Any]) -> None:
    try:
        while True:
            await asyncio.sleep(0)
            report({"n": 1})
    finally:
        config["log"].append("finally")


def test_cleanup_unwinds_an_async_function(host: Callable[..., FunctionTrainable]) -> None:
    log: list[str] = []
    t = host(_async_train, {"log": log})
    assert t.step() == {"n": 1}
    t.cleanup()
    assert log == ["finally"] and not t.abandoned


def test_a_function_that_ignores_unwinding_is_abandoned(
    host: Callable[..., FunctionTrainable], monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    def stubborn(config: dict[str, Any]) -> None:
        try:
            report({"n": 1})
        finally:
            release.wait(30)

    monkeypatch.setattr(fmod, "FUNCTION_GRACE_S", 0.2)
    t = host(stubborn)
    t.step()
    t.cleanup()
    assert t.abandoned
    release.set()


def test_errors_are_raised_in_the_function_at_the_line(
    host: Callable[..., FunctionTrainable], tmp_path: Path
) -> None:
    with pytest.raises(TypeError, match="trial t: report.. takes a dict of metrics, got list"):
        host(reports_a_list).step()
    with pytest.raises(FileNotFoundError, match="trial t: .*not-there.*no such directory") as err:
        host(reports_a_missing_checkpoint, {"where": str(tmp_path)}).step()
    frames = [f.name for f in traceback.extract_tb(err.value.__traceback__)]
    assert "reports_a_missing_checkpoint" in frames
    (tmp_path / "file").write_text("")

    def reports_a_file(config: dict[str, Any]) -> None:
        report({}, checkpoint=tmp_path / "file")

    with pytest.raises(NotADirectoryError, match="trial t: .*file.*not a directory"):
        host(reports_a_file).step()


def test_the_working_directory_is_copied_not_moved(
    host: Callable[..., FunctionTrainable], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "w.txt").write_text("weights")
    monkeypatch.chdir(tmp_path)

    def train(config: dict[str, Any]) -> None:
        report({}, checkpoint=".")

    t = host(train)
    assert t.step() == {REPORTED_CHECKPOINT: True}
    assert os.listdir(tmp_path) == ["w.txt"] and Path.cwd() == tmp_path
    t.save_checkpoint(str(tmp_path / "saved"))
    assert (tmp_path / "saved" / "w.txt").read_text() == "weights"


def test_the_function_knows_its_trial_id(host: Callable[..., FunctionTrainable]) -> None:
    from orchestrator.actor.function import current_trial_id

    def train(config: dict[str, Any]) -> None:
        report({"trial": current_trial_id()})

    assert host(train).step() == {"trial": "t"}
    with pytest.raises(NotInTrial, match=r"current_trial_id\(\) was called outside a trial"):
        current_trial_id()


def test_report_and_get_checkpoint_outside_a_trial_are_refused() -> None:
    with pytest.raises(NotInTrial, match=r"report\(\) was called outside a trial"):
        report({"loss": 1.0})
    with pytest.raises(NotInTrial, match=r"get_checkpoint\(\) was called outside a trial"):
        get_checkpoint()


def test_a_function_that_never_reports_is_done_with_a_warning(
    host: Callable[..., FunctionTrainable], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "orchestrator.actor.function"):
        assert host(never_reports).step() == {FUNCTION_DONE: True}
    assert "trial t: its function never_reports returned without calling report()" in caplog.text


def test_a_returned_dict_is_the_last_result_and_other_returns_are_not(
    host: Callable[..., FunctionTrainable], caplog: pytest.LogCaptureFixture
) -> None:
    """Ray Tune's rule, the engine's too: a function that returns a dict has reported it
    (one more result, after its reports); None adds nothing; anything else is said."""

    def scores(config: dict[str, Any]) -> dict[str, Any]:
        report({"a": 1})
        return {"score": config["a"] * 2}

    async def scores_later(config: dict[str, Any]) -> dict[str, Any]:
        return {"score": 3}

    def returns_a_model(config: dict[str, Any]) -> object:
        report({"a": 1})
        return object()

    t = host(scores, {"a": 4})
    assert [t.step(), t.step(), t.step()] == [{"a": 1}, {"score": 8}, {FUNCTION_DONE: True}]
    t = host(scores_later)
    assert [t.step(), t.step()] == [{"score": 3}, {FUNCTION_DONE: True}]
    with caplog.at_level(logging.WARNING, "orchestrator.actor.function"):
        t = host(returns_a_model)
        assert [t.step(), t.step()] == [{"a": 1}, {FUNCTION_DONE: True}]
    assert "trial t: its function returned a object, not a dict of metrics: ignored" in caplog.text
    # In a buffered call the returned dict is judged like any report.
    seen: list[dict[str, Any]] = []
    t = host(scores, {"a": 1})
    last = t.step_batch(lambda result, took: seen.append(dict(result)) or After.MORE)
    assert seen == [{"a": 1}, {"score": 2}] and last == {FUNCTION_DONE: True}


# -- the machine -----------------------------------------------------------------------------


def test_the_machine_finishes_on_a_returned_function_and_records_nothing_of_it() -> None:
    m = running()
    batch = ({"a": 1}, {"a": 2, REPORTED_CHECKPOINT: True})
    actions = m.handle(TrainResult(m.generation, batch))
    assert kinds(actions) == ["Report", "Report", "Save", "Train"]
    assert isinstance(actions[1], Report) and REPORTED_CHECKPOINT not in actions[1].result
    actions = m.handle(TrainResult(m.generation, ({FUNCTION_DONE: True, "time_total_s": 1},)))
    # The save is in flight: it settles after it (within a grace period, as any stop).
    assert kinds(actions) == ["ArmGrace"]
    actions = m.handle(SaveDone(m.generation, ckpt(2)))
    assert kinds(actions) == ["Notify", "StopActor", "Notify"]
    assert m.state is TrialState.TERMINATED and m.iteration == 2


@pytest.mark.parametrize("on_demand", [True, False])
def test_a_paused_function_trial_asks_no_final_save(on_demand: bool) -> None:
    m = running(saves_on_demand=on_demand)
    m.handle(TrainResult(m.generation, ({"a": 1},)))
    # a step is in flight: the pause waits for it (a grace period, should it hang)
    assert [type(a).__name__ for a in m.handle(Decided(Pause("t")))] == ["ArmGrace"]
    actions = m.handle(TrainResult(m.generation, ({"a": 2},)))
    assert kinds(actions) == ["Report"] + (["Save"] if on_demand else ["StopActor"])


# -- the actor, in this process ----------------------------------------------------------------


class HereActor(TrialActor):
    """The trial actor as a plain object: it runs in no Ray worker, so no node id."""

    def _where(self) -> tuple[str, str]:
        return "no-node", "no-host"


def test_buffered_steps_run_several_reports_but_stop_at_each_checkpoint(tmp_path: Path) -> None:
    """``train_many`` ends a batch right after a reported checkpoint (its save comes
    next) and after the function's return, never later."""
    actor = HereActor(str(tmp_path))
    stop = StopCondition("t", {"training_iteration": 100})
    payload = cloudpickle.dumps((wrap_function(counting), {"every": 3, "epochs": 8}, stop))
    actor.setup("t", 1, payload)
    try:
        batches = []
        for seq in (1, 3):
            batch = actor.train_many("t", seq, 10)
            batches.append([r["count"] for r in batch])
            assert [REPORTED_CHECKPOINT in r for r in batch] == [False, False, True]
            saved = actor.save("t", seq + 1, batch[-1]["count"])
            with open(os.path.join(saved, "state.json")) as fh:
                assert json.load(fh) == {"count": batch[-1]["count"]}
        assert batches == [[1, 2, 3], [4, 5, 6]]
        last = actor.train_many("t", 5, 10)
        assert [r.get("count") for r in last] == [7, 8, None] and FUNCTION_DONE in last[-1]
    finally:
        actor.drop("t", 1)


def test_a_buffered_function_call_stops_exactly_and_keeps_steps_before_an_error(
    tmp_path: Path,
) -> None:
    """A stop on a metric ends the call at that report, though the function's thread
    judges it; a function that raises mid-call keeps the reports before (the error comes
    with the next call), as a class's steps do."""
    actor = HereActor(str(tmp_path))
    stop = StopCondition("t", {"count": 5})
    marks = tmp_path / "marks"
    marks.mkdir()
    config = {"fail_once_at": 8, "marks": str(marks)}
    payload = cloudpickle.dumps((wrap_function(counting), config, stop))
    actor.setup("t", 1, payload)
    try:
        first = actor.train_many("t", 1, 100)
        assert [r["count"] for r in first] == [1, 2, 3, 4, 5]
        assert [r["time_total_s"] >= r["time_this_iter_s"] >= 0 for r in first] == [True] * 5
        # (the driver would stop here; driven by hand, go on past the stop condition)
        actor._trials["t"].stop = None
        second = actor.train_many("t", 2, 100)
        assert [r["count"] for r in second] == [6, 7]
        with pytest.raises(RuntimeError, match="planned failure at 8"):
            actor.train_many("t", 3, 100)
    finally:
        actor.drop("t", 1)


# -- on real Ray -----------------------------------------------------------------------------


@pytest.mark.usefixtures("ray_local")
async def test_sigkilled_actors_leave_a_failure_free_history(tmp_path: Path) -> None:
    """Four kills land before any trial can end: each waits after count 20 (not a
    checkpoint's: a restarted trial reports again, with its new pid, before it waits)
    until the kills are done, however fast or slow the machine."""
    final, gate = 40, tmp_path / "gate"
    gate.mkdir()
    config = {"every": 3, "delay": 0.03, "gate": str(gate), "gate_at": 20}
    async with Orchestrator(
        storage=tmp_path, name="chaos", max_failures=-1, failure_backoff=0.05
    ) as orch:
        trials = [
            orch.add_trial(counting, config, stop={"count": final}, resources=CPU) for _ in range(3)
        ]
        runner = asyncio.create_task(orch.run())
        kills = 0
        deadline = time.monotonic() + 120  # stale pids of a batch's results: bounded
        while not runner.done() and kills < 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.4)
            live = [t for t in trials if t.state is TrialState.RUNNING and t.last_result]
            if live:
                victim = live[kills % len(live)]
                assert victim.last_result is not None
                try:
                    kill_worker(victim.last_result["pid"])
                    kills += 1
                except ProcessLookupError:
                    pass  # restarting: its next result names its new process
        (gate / "open").touch()
        await runner
    assert kills >= 2 and sum(t.num_failures for t in trials) >= 1
    for trial in trials:
        assert trial.state is TrialState.TERMINATED, (trial.id, trial.error)
        assert_failure_free_history(trial, final)
