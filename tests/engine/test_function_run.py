"""Function trainables (``def train(config)`` + ``report``) in whole experiments on
the fake Ray: the function runs in a thread of the real trial actor, which is itself a
thread here. Moved from ``tests/actor/test_function.py``, which keeps the wrapper driven by
hand and, on real Ray, function trainables whose worker processes are SIGKILLed."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from orchestrator import TrialState
from orchestrator.core.wire import REPORTED_CHECKPOINT
from storage import open_storage

from ..support.fake_engine import MakeOrchestrator
from ..support.observe import committed
from ..support.trainables import (
    assert_failure_free_history,
    async_counting,
    counting,
    never_reports,
    reports_a_list,
    reports_a_missing_checkpoint,
)

CPU = {"cpu": 0.25}


def history(trial: Any) -> list[tuple[int, int]]:
    return [(r["training_iteration"], r["count"]) for r in trial.results]


async def test_sync_and_async_functions_stop_exactly(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="stops") as orch:
        sync = orch.add_trial(
            counting, {"every": 4}, stop={"training_iteration": 10}, resources=CPU
        )
        coro = orch.add_trial(async_counting, {"every": 4}, stop={"count": 7}, resources=CPU)
        ends = orch.add_trial(counting, {"epochs": 5}, stop={"count": 50}, resources=CPU)
        await orch.run()
    for trial, final, ckpts in ((sync, 10, [4, 8]), (coro, 7, [4]), (ends, 5, [])):
        assert trial.state is TrialState.TERMINATED, trial.error
        assert_failure_free_history(trial, final)
        assert [c.iteration for c in trial.checkpoints] == ckpts
        assert all(REPORTED_CHECKPOINT not in r for r in trial.results)
    assert sync.id.startswith("counting_") and coro.id.startswith("async_counting_")


async def test_result_buffer_gives_the_unbuffered_history(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    runs = {}
    for buffer in (1, 10):
        async with orchestrator(storage=tmp_path, name=f"buf{buffer}") as orch:
            trial = orch.add_trial(
                counting,
                {"every": 4},
                stop={"training_iteration": 23},
                resources=CPU,
                result_buffer=buffer,
            )
            await orch.run()
        assert trial.state is TrialState.TERMINATED, trial.error
        runs[buffer] = (history(trial), [c.iteration for c in trial.checkpoints])
    assert runs[10] == runs[1]
    assert runs[1] == ([(i, i) for i in range(1, 24)], [4, 8, 12, 16, 20])


async def test_pause_resumes_from_the_newest_reported_checkpoint(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="pause") as orch:
        trial = orch.add_trial(
            counting, {"every": 4, "delay": 0.05}, stop={"count": 16}, resources=CPU
        )
        runner = asyncio.create_task(orch.run())
        while trial.iteration < 5:
            await asyncio.sleep(0.01)
        await trial.pause()
        assert trial.state is TrialState.PAUSED
        paused_at = trial.iteration
        newest = trial.checkpoints[-1].iteration
        assert newest % 4 == 0 and newest <= paused_at  # no save on pause
        await trial.resume()
        await runner
    assert trial.state is TrialState.TERMINATED, trial.error
    assert trial.errors == []  # no final save was asked for: there was none to give
    assert_failure_free_history(trial, 16)  # later results went; the count came back
    assert trial.discarded_results == paused_at - newest
    assert {r["resumed_from"] for r in trial.results[newest:]} == {newest}


async def test_restore_mid_run_restarts_the_function_from_that_checkpoint(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()

    class RollBackOnce:
        done = False

        async def on_trial_result(self, trial: Any, result: dict[str, Any]) -> None:
            if result["training_iteration"] == 10 and not self.done:
                self.done = True
                while not any(c.iteration == 4 for c in trial.checkpoints):
                    await asyncio.sleep(0.02)
                await trial.restore(next(c for c in trial.checkpoints if c.iteration == 4))

    async with orchestrator(storage=tmp_path, name="rb", hooks=[RollBackOnce()]) as orch:
        trial = orch.add_trial(
            counting,
            {"every": 2, "delay": 0.02, "marks": str(marks)},
            stop={"training_iteration": 16},
            resources=CPU,
        )
        await orch.run()
    assert trial.state is TrialState.TERMINATED, trial.error
    assert_failure_free_history(trial, 16)
    assert trial.discarded_results > 0
    resumed = [r["resumed_from"] for r in trial.results]
    assert resumed == [0] * 4 + [4] * 12  # get_checkpoint() held checkpoint 4
    runs = (marks / "runs").read_text().split()
    assert runs[:3] == ["start:0", "finally", "start:4"]  # the first run's finally ran


async def test_errors_in_the_function_name_the_trial_and_the_problem(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="errors", max_failures=0) as orch:
        not_dict = orch.add_trial(reports_a_list, resources=CPU, trial_id="not_dict")
        missing = orch.add_trial(
            reports_a_missing_checkpoint, {"where": str(tmp_path)}, resources=CPU, trial_id="gone"
        )
        await orch.run()
    for trial, problem, line in (
        (not_dict, "report() takes a dict of metrics, got list", "report([1, 2])"),
        (missing, f"{tmp_path / 'not-there'}", 'report({"count": 1}, checkpoint='),
    ):
        assert trial.state is TrialState.ERROR and trial.results == []
        assert trial.error is not None
        text = str(trial.error)
        assert f"trial {trial.id}: " in text and problem in text, text
        remote = str(trial.error.__cause__)  # Ray's error, with the worker's traceback
        assert line in remote, remote  # it was raised in the function, at that line


async def test_a_function_that_never_reports_ends_with_no_results(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, orchestrator: MakeOrchestrator
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator.actor")
    async with orchestrator(storage=tmp_path, name="silent") as orch:
        trial = orch.add_trial(never_reports, resources=CPU)
        await orch.run()
    assert trial.state is TrialState.TERMINATED and trial.results == [] and trial.error is None
    # The warning is the actor's (in a worker, Ray forwards it to the driver's output:
    # tests/api/test_first_hour.py checks that forwarding).
    warning = f"trial {trial.id}: its function never_reports returned without"
    assert warning in caplog.text


async def test_a_raising_function_is_retried_from_its_newest_checkpoint(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    async with orchestrator(storage=tmp_path, name="raises", max_failures=1) as orch:
        trial = orch.add_trial(
            counting,
            {"every": 4, "fail_once_at": 7, "marks": str(marks)},
            stop={"count": 12},
            resources=CPU,
        )
        await orch.run()
    assert trial.state is TrialState.TERMINATED, trial.error
    assert trial.num_failures == 1 and "planned failure at 7" in str(trial.errors[0])
    assert_failure_free_history(trial, 12)
    assert (marks / "runs").read_text().split()[:3] == ["start:0", "finally", "start:4"]


@pytest.mark.parametrize("padding", [0, 12])  # committed by the actor; by the persister
async def test_reported_checkpoints_are_committed_intact_and_retained(
    tmp_path: Path, padding: int, orchestrator: MakeOrchestrator
) -> None:
    """The function's directory is deleted right after report(); what was reported is
    still committed, file for file, and keep_checkpoints=2 holds."""
    async with orchestrator(storage=tmp_path, name="keep", keep_checkpoints=2) as orch:
        trial = orch.add_trial(
            counting,
            {"every": 1, "padding_files": padding},
            stop={"count": 10},
            resources=CPU,
        )
        await orch.run()
        await asyncio.sleep(0.5)  # let the background GC finish its deletes
    assert trial.state is TrialState.TERMINATED, trial.error
    assert [c.iteration for c in trial.checkpoints] == [9, 10]
    assert committed(tmp_path / "keep", trial) == ["checkpoint_000009", "checkpoint_000010"]
    async with open_storage(tmp_path / "keep") as store:
        for ckpt in trial.checkpoints:
            local = tmp_path / f"read-{ckpt.iteration}"
            await store.get_checkpoint(ckpt.key, local)  # verifies sizes and checksums
            state = json.loads((local / "state.json").read_text())
            assert state == {"count": ckpt.iteration}
            for i in range(padding):
                assert (local / f"padding{i}").read_text() == f"{ckpt.iteration}:{i}"
