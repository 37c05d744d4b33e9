"""What a newcomer gets wrong in the first hour, answered at once and clearly, on the
fake Ray (moved from ``tests/api/test_first_hour.py``, which keeps what needs real workers:
a trainable they cannot import, and their output's prefix)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from orchestrator import TrialState

from ..support.fake_engine import MakeOrchestrator
from ..support.fakeray import FakeRay
from ..support.observe import wait_for
from ..support.trainables import Counter, assert_failure_free_history
from .trainables import FakeRecorder

CPU = {"cpu": 0.25}


class LateMetric(Counter):
    """Reports ``late`` only from its third step on."""

    def step(self) -> dict[str, Any]:
        result = super().step()
        if self.count >= 3:
            result["late"] = self.count
        return result


async def test_a_stop_metric_no_result_reports_is_an_error_at_the_first_result(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="m", max_failures=-1) as orch:
        wrong = orch.add_trial(Counter, stop={"no_such_metric": 1}, resources=CPU)
        right = orch.add_trial(Counter, stop={"training_iteration": 5}, resources=CPU)
        await asyncio.wait_for(orch.run(), 60)
    assert wrong.state is TrialState.ERROR
    message = str(wrong.error)
    assert wrong.id in message and "'no_such_metric'" in message
    assert "'count'" in message and "strict_metrics=False" in message
    assert wrong.num_failures == 1 and len(wrong.results) == 1  # not retried, kept
    assert right.state is TrialState.TERMINATED
    assert_failure_free_history(right, 5)


async def test_strict_metrics_off_allows_a_metric_that_appears_later(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="m", strict_metrics=False) as orch:
        trial = orch.add_trial(LateMetric, stop={"late": 3}, resources=CPU)
        await asyncio.wait_for(orch.run(), 60)
    assert trial.state is TrialState.TERMINATED
    assert trial.iteration == 3


async def test_resources_no_node_has_are_warned_about_within_seconds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, orchestrator: MakeOrchestrator
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator")
    # The stopped trial's actor never started, so its shutdown never answers: the exit
    # waits the stop's grace for it (30 s by default), then kills it.
    async with orchestrator(storage=tmp_path, name="r", stop_grace_s=1.0) as orch:
        greedy = orch.add_trial(Counter, resources={"cpu": 64})
        fine = orch.add_trial(Counter, stop={"training_iteration": 3}, resources=CPU)
        runner = asyncio.create_task(orch.run())
        await wait_for(lambda: "no node of the Ray cluster has that much" in caplog.text, 30)
        assert fine.state is not TrialState.ERROR
        await greedy.stop()
        await asyncio.wait_for(runner, 60)
    line = next(r.getMessage() for r in caplog.records if "that much" in r.getMessage())
    assert greedy.id in line and "CPU: 64" in line and "autoscaling" in line
    assert fine.id not in line
    assert fine.state is TrialState.TERMINATED and greedy.state is TrialState.TERMINATED


class OddResults(Counter):
    def step(self) -> dict[str, Any]:
        result = super().step()
        result.update(
            f32=np.float32(0.5), i64=np.int64(7), arr=np.arange(3), thing=object(), pair=(1, 2)
        )
        return result


async def test_numpy_values_are_converted_and_odd_ones_named_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, orchestrator: MakeOrchestrator
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator")
    async with orchestrator(storage=tmp_path, name="n") as orch:
        trial = orch.add_trial(OddResults, stop={"training_iteration": 5}, resources=CPU)
        await orch.run()
    last = trial.results[-1]
    assert last["f32"] == 0.5 and type(last["f32"]) is float
    assert last["i64"] == 7 and type(last["i64"]) is int
    assert last["arr"] == [0, 1, 2] and last["pair"] == [1, 2]
    assert isinstance(last["thing"], str) and last["thing"].startswith("<object")
    warnings = [r.getMessage() for r in caplog.records if "'thing'" in r.getMessage()]
    assert len(warnings) == 1 and trial.id in warnings[0]


class SavesNothing(Counter):
    def save_checkpoint(self, checkpoint_dir: str) -> None:
        pass


async def test_an_empty_checkpoint_is_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, orchestrator: MakeOrchestrator
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator")
    async with orchestrator(storage=tmp_path, name="e") as orch:
        trial = orch.add_trial(
            SavesNothing, stop={"training_iteration": 6}, checkpoint_every=2, resources=CPU
        )
        await orch.run()
    warnings = [r.getMessage() for r in caplog.records if "wrote nothing" in r.getMessage()]
    assert len(warnings) == 1 and trial.id in warnings[0]
    assert len(trial.checkpoints) == 3  # still committed: nothing lost, just said


async def test_a_recovered_trial_has_no_error_but_keeps_its_history(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="rec", max_failures=2) as orch:
        trial = orch.add_trial(
            FakeRecorder,
            {"delay": 0.02, "marks": str(tmp_path), "fail_once_at": 6},
            stop={"training_iteration": 20},
            checkpoint_every=5,
            resources=CPU,
        )
        await orch.run()
    assert trial.state is TrialState.TERMINATED
    assert trial.error is None
    assert len(trial.errors) == 1 and "planned one-off failure" in str(trial.errors[0])
    assert_failure_free_history(trial, 20)


async def test_a_killed_trial_recovers_and_its_error_clears(
    tmp_path: Path, fake_ray: FakeRay, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="k", max_failures=1) as orch:
        trial = orch.add_trial(
            FakeRecorder,
            {"delay": 0.02},
            stop={"training_iteration": 30},
            checkpoint_every=5,
            resources=CPU,
        )
        runner = asyncio.create_task(orch.run())
        await wait_for(lambda: len(trial.checkpoints) >= 1 and trial.last_result is not None)
        assert trial.last_result is not None
        fake_ray.kill_worker(trial.last_result["pid"])
        await wait_for(lambda: trial.num_failures == 1)
        await asyncio.wait_for(runner, 60)
    assert trial.state is TrialState.TERMINATED and trial.error is None
    assert len(trial.errors) == 1
