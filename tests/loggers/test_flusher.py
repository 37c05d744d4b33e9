"""The flusher: cheap hook calls, background batches, clean shutdown, contained
failures, uploads of changed files only, and resumed experiments."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.engine.hooks import HookRunner
from orchestrator.views.loggers import ExperimentLogger

from ..support.logger_fakes import (
    FakeCheckpoint,
    FakeTrial,
    MemoryStorage,
    event_files,
    read_progress,
    read_results,
    scalars,
)
from ..support.observe import OwnTasks

_OWN = OwnTasks("loggers:flush")


@pytest.fixture(autouse=True)
async def others_flushers() -> None:
    _OWN.reset()


def flusher_tasks() -> list[asyncio.Task[Any]]:
    """The flushers this test started that are still running."""
    return _OWN.running()


async def test_20000_results_cost_the_hooks_no_write_each(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, flush_interval=60)
    trials = [FakeTrial(f"t{i:02d}", {"lr": 0.1, "nested": {"a": [1, 2]}}) for i in range(20)]
    results = [
        (trial, trial.report(i, loss=1.0 / i, acc=0.5, eval={"x": 1.0}))
        for i in range(1, 1001)
        for trial in trials
    ]
    start = time.thread_time()  # this thread's CPU: what other processes run costs it nothing
    for trial, result in results:
        await logger.on_trial_result(trial, result)
    elapsed = time.thread_time() - start
    assert logger.statistics().pending == 20_000
    # Quiet, about 60 ms. The bound is generous for a loaded CI machine: one write per
    # call would take seconds.
    assert elapsed < 1.0, f"20,000 on_trial_result calls took {elapsed * 1e3:.1f} ms"
    await logger.aclose()
    assert logger.statistics().pending == 0
    assert len(read_results(tmp_path / "t07")) == 1000
    assert len(scalars(tmp_path / "t07", "loss")) == 1000


async def test_the_flusher_writes_in_the_background_and_aclose_leaves_no_task(
    tmp_path: Path,
) -> None:
    logger = ExperimentLogger(tmp_path, loggers=("json",), flush_interval=0.05)
    trial = FakeTrial("t1")
    await logger.on_trial_result(trial, trial.report(1, loss=1.0))
    assert not (tmp_path / "t1").exists()  # the hook itself does no I/O
    assert len(flusher_tasks()) == 1
    for _ in range(100):
        await asyncio.sleep(0.02)
        if (tmp_path / "t1" / "result.json").exists():
            break
    assert len(read_results(tmp_path / "t1")) == 1
    await logger.on_experiment_end([trial])
    assert flusher_tasks() == []
    # Reusable: a later hook call starts a new flusher; the files go on.
    await logger.on_trial_result(trial, trial.report(2, loss=2.0))
    await logger.aclose()
    assert read_results(tmp_path / "t1")["training_iteration"].tolist() == [1, 2]
    assert flusher_tasks() == []


async def test_max_pending_results_flush_before_the_interval(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, loggers=("csv",), flush_interval=3600, max_pending=50)
    trial = FakeTrial("t1")
    for i in range(1, 51):
        await logger.on_trial_result(trial, trial.report(i, loss=float(i)))
    for _ in range(100):
        await asyncio.sleep(0.02)
        if logger.statistics().flushes:
            break
    assert len(read_progress(tmp_path / "t1")) == 50
    await logger.aclose()


async def test_a_failing_trial_is_logged_once_and_the_others_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "bad").write_text("a file where the trial's directory should be")
    logger = ExperimentLogger(tmp_path, flush_interval=60)
    good, bad = FakeTrial("good"), FakeTrial("bad")
    with caplog.at_level(logging.ERROR, logger="orchestrator.views.loggers"):
        for i in range(1, 4):
            for trial in (bad, good):
                await logger.on_trial_result(trial, trial.report(i, loss=float(i)))
            await logger.flush()
        await logger.on_experiment_end([good, bad])
    errors = [r for r in caplog.records if r.name == "orchestrator.views.loggers"]
    assert len(errors) == 1 and "bad" in errors[0].getMessage()
    assert logger.statistics().failed_trials == frozenset({"bad"})
    assert read_results(tmp_path / "good")["loss"].tolist() == [1.0, 2.0, 3.0]
    assert read_progress(tmp_path / "good")["loss"].tolist() == [1.0, 2.0, 3.0]
    assert len(scalars(tmp_path / "good", "loss")) == 3


async def test_uploads_send_only_changed_files_and_a_final_upload(tmp_path: Path) -> None:
    storage = MemoryStorage()
    logger = ExperimentLogger(tmp_path, storage=storage, upload_interval=3600, flush_interval=60)
    t1, t2 = FakeTrial("t1"), FakeTrial("t2")
    for trial in (t1, t2):
        await logger.on_trial_result(trial, trial.report(1, loss=1.0))
    await logger.flush()
    (event_t1,) = (f"t1/{p.name}" for p in event_files(tmp_path / "t1"))
    first = set(storage.writes)
    assert {"t1/params.json", "t1/params_history.jsonl", "t1/result.json"} <= first
    assert {"t1/progress.csv", event_t1, "t2/result.json"} <= first
    assert len(storage.writes) == len(first) == 10  # 5 files per trial, once each

    storage.writes.clear()
    await logger.on_trial_result(t1, t1.report(2, loss=2.0))
    await logger.flush()
    assert sorted(storage.writes) == sorted(["t1/result.json", "t1/progress.csv", event_t1])

    storage.writes.clear()
    await logger.flush()
    assert storage.writes == []  # nothing changed

    await logger.on_trial_result(t2, t2.report(2, loss=2.0))
    await logger.on_trial_complete(t2)  # hparams: the event file changes once more
    storage.writes.clear()
    await logger.on_experiment_end([t1, t2])
    assert "t2/result.json" in storage.writes and "t1/result.json" not in storage.writes
    for key, data in storage.objects.items():
        assert (tmp_path / key).read_bytes() == data, key


async def test_a_remote_trials_abandoned_rows_add_to_the_stored_ones(tmp_path: Path) -> None:
    """A resumed remote experiment's logger starts on an empty disk: the rows an earlier
    session's rollbacks abandoned stay first in the uploaded result.abandoned.json."""
    storage = MemoryStorage()
    earlier = b'{"training_iteration": 7, "loss": 0.5}\n'
    storage.objects["t1/result.abandoned.json"] = earlier
    logger = ExperimentLogger(tmp_path, storage=storage, loggers=("json",), flush_interval=60)
    trial = FakeTrial("t1")
    for i in range(1, 11):
        await logger.on_trial_result(trial, trial.report(i, loss=float(i)))
    await logger.flush()
    trial.rollback(5)
    await logger.on_trial_restore(trial, FakeCheckpoint(iteration=5))
    await logger.flush()
    await logger.on_trial_result(trial, trial.report(6, loss=60.0))
    trial.rollback(5)
    await logger.on_trial_restore(trial, FakeCheckpoint(iteration=5))  # a second one
    await logger.aclose()
    stored = storage.objects["t1/result.abandoned.json"]
    assert stored.startswith(earlier)
    rows = [json.loads(line) for line in stored.splitlines()]
    assert [(r["training_iteration"], r["loss"]) for r in rows] == [
        (7, 0.5),
        *((i, float(i)) for i in range(6, 11)),
        (6, 60.0),
    ]
    assert (tmp_path / "t1" / "result.abandoned.json").read_bytes() == stored


async def test_uploads_wait_for_the_upload_interval_and_retry_failures(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    storage = MemoryStorage()
    storage.fail_keys.add("t1/result.json")
    logger = ExperimentLogger(
        tmp_path, storage=storage, loggers=("json",), upload_interval=3600, flush_interval=0.02
    )
    trial = FakeTrial("t1")
    with caplog.at_level(logging.WARNING, logger="orchestrator.views.loggers"):
        await logger.on_trial_result(trial, trial.report(1, loss=1.0))
        for _ in range(100):  # the first background flush uploads (none was due before)
            await asyncio.sleep(0.02)
            if storage.writes:
                break
        await logger.on_trial_result(trial, trial.report(2, loss=2.0))
        await asyncio.sleep(0.2)  # several flushes, no upload: the interval has not passed
        assert "t1/result.json" not in storage.objects
        assert sorted(storage.writes) == ["t1/params.json", "t1/params_history.jsonl"]
        assert (tmp_path / "t1" / "result.json").read_bytes().count(b"\n") == 2
        storage.fail_keys.clear()
        await logger.aclose()
    assert storage.objects["t1/result.json"] == (tmp_path / "t1" / "result.json").read_bytes()
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        "could not upload t1/result.json"
    ]


async def test_a_resumed_trial_is_rewritten_from_its_history(tmp_path: Path) -> None:
    first = ExperimentLogger(tmp_path, flush_interval=60)
    trial = FakeTrial("t1")
    for i in range(1, 6):
        await first.on_trial_result(trial, trial.report(i, loss=float(i)))
    await first.on_experiment_end([trial])

    # The driver restarts: the journal brings back results 1..5 and checkpoint 3,
    # from which the trial continues.
    resumed = ExperimentLogger(tmp_path, flush_interval=60)
    trial.latest_checkpoint = FakeCheckpoint(iteration=3)
    await resumed.on_trial_start(trial)
    trial.rollback(3)
    await resumed.on_trial_restore(trial, FakeCheckpoint(iteration=3))
    for i in range(4, 7):
        await resumed.on_trial_result(trial, trial.report(i, loss=10.0 * i))
    await resumed.on_experiment_end([trial])

    expected = [(1, 1.0), (2, 2.0), (3, 3.0), (4, 40.0), (5, 50.0), (6, 60.0)]
    results = read_results(tmp_path / "t1")
    assert list(zip(results["training_iteration"], results["loss"], strict=True)) == expected
    assert scalars(tmp_path / "t1", "loss") == expected  # the old files' points are purged


async def test_trials_first_seen_at_the_end_get_their_logs(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, loggers=("json",), flush_interval=60)
    trial = FakeTrial("t1")
    trial.report(1, loss=1.0)
    trial.report(2, loss=2.0)
    await logger.on_experiment_end([trial])
    assert read_results(tmp_path / "t1")["loss"].tolist() == [1.0, 2.0]


async def test_a_cancelled_aclose_loses_nothing(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, flush_interval=60)
    trials = [FakeTrial(f"t{i:02d}") for i in range(50)]
    for i in range(1, 201):
        for trial in trials:
            await logger.on_trial_result(trial, trial.report(i, loss=float(i)))
    closing = asyncio.ensure_future(logger.aclose())
    await asyncio.sleep(0.02)  # the batch (10,000 results) is in the worker thread now
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    await logger.on_trial_result(trials[0], trials[0].report(201, loss=201.0))
    await logger.aclose()

    assert flusher_tasks() == []
    assert read_results(tmp_path / "t00")["training_iteration"].tolist() == list(range(1, 202))
    assert len(read_progress(tmp_path / "t49")) == 200
    assert [step for step, _ in scalars(tmp_path / "t00", "loss")] == list(range(1, 202))


def test_a_loop_torn_down_without_aclose_still_gets_the_logs(tmp_path: Path) -> None:
    trial = FakeTrial("t1")

    async def forgetful_driver() -> None:
        logger = ExperimentLogger(tmp_path, flush_interval=3600)
        for i in range(1, 11):
            await logger.on_trial_result(trial, trial.report(i, loss=float(i)))
        # no aclose(): asyncio.run cancels the flusher as it ends

    # A thread of its own, so this loop is not the test session's.
    thread = threading.Thread(target=asyncio.run, args=(forgetful_driver(),))
    thread.start()
    thread.join(timeout=60)
    assert read_results(tmp_path / "t1")["training_iteration"].tolist() == list(range(1, 11))
    assert [step for step, _ in scalars(tmp_path / "t1", "loss")] == list(range(1, 11))


async def test_under_the_real_hook_runner(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, flush_interval=60)
    runner = HookRunner([logger])
    trials = [FakeTrial("a"), FakeTrial("b")]
    for trial in trials:
        runner.emit(trial.id, "on_trial_start", trial)
    for i in range(1, 6):
        for trial in trials:
            runner.emit(trial.id, "on_trial_result", trial, trial.report(i, loss=float(i)))
    trials[0].rollback(2)
    runner.emit("a", "on_trial_restore", trials[0], FakeCheckpoint(iteration=2))
    runner.emit("a", "on_trial_result", trials[0], trials[0].report(3, loss=30.0))
    for trial in trials:
        runner.emit(trial.id, "on_trial_complete", trial)
    await runner.wait_idle()
    await runner.call_now("on_experiment_end", trials)
    await runner.aclose()

    assert runner.statistics().failures == 0
    assert read_results(tmp_path / "a")["loss"].tolist() == [1.0, 2.0, 30.0]
    assert read_progress(tmp_path / "b")["loss"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert flusher_tasks() == []
