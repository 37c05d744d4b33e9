"""What a newcomer gets wrong in the first hour, each answered at once and clearly: the
trial, key or URI named, the remedy given, and nothing lost."""

from __future__ import annotations

import asyncio
import logging
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from orchestrator import ConfigError, Orchestrator, Trainable, Trial, TrialState

from .trainables import Counter, Recorder, assert_failure_free_history, kill_worker

pytestmark = pytest.mark.usefixtures("ray_local")

CPU = {"cpu": 0.25}


async def wait_for(predicate: Any, timeout: float = 60) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), timeout)


class LateMetric(Counter):
    """Reports ``late`` only from its third step on."""

    def step(self) -> dict[str, Any]:
        result = super().step()
        if self.count >= 3:
            result["late"] = self.count
        return result


async def test_a_stop_metric_no_result_reports_is_an_error_at_the_first_result(
    tmp_path: Path,
) -> None:
    async with Orchestrator(storage=tmp_path, name="m", max_failures=-1) as orch:
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


async def test_strict_metrics_off_allows_a_metric_that_appears_later(tmp_path: Path) -> None:
    async with Orchestrator(storage=tmp_path, name="m", strict_metrics=False) as orch:
        trial = orch.add_trial(LateMetric, stop={"late": 3}, resources=CPU)
        await asyncio.wait_for(orch.run(), 60)
    assert trial.state is TrialState.TERMINATED
    assert trial.iteration == 3


async def test_resources_no_node_has_are_warned_about_within_seconds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator")
    async with Orchestrator(storage=tmp_path, name="r") as orch:
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


def test_a_config_value_that_cannot_reach_a_worker_is_named(tmp_path: Path) -> None:
    orch = Orchestrator(storage=tmp_path, name="c")
    with pytest.raises(ConfigError) as caught:
        orch.add_trial(Counter, {"lr": 0.1, "opt": {"lock": threading.Lock()}}, trial_id="t1")
    message = str(caught.value)
    assert "trial t1" in message and "'opt.lock'" in message and "setup()" in message
    assert orch.trials == []


class OddResults(Counter):
    def step(self) -> dict[str, Any]:
        result = super().step()
        result.update(
            f32=np.float32(0.5), i64=np.int64(7), arr=np.arange(3), thing=object(), pair=(1, 2)
        )
        return result


async def test_numpy_values_are_converted_and_odd_ones_named_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator")
    async with Orchestrator(storage=tmp_path, name="n") as orch:
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
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator")
    async with Orchestrator(storage=tmp_path, name="e") as orch:
        trial = orch.add_trial(
            SavesNothing, stop={"training_iteration": 6}, checkpoint_every=2, resources=CPU
        )
        await orch.run()
    warnings = [r.getMessage() for r in caplog.records if "wrote nothing" in r.getMessage()]
    assert len(warnings) == 1 and trial.id in warnings[0]
    assert len(trial.checkpoints) == 3  # still committed: nothing lost, just said


async def test_a_trainable_the_workers_cannot_import_errors_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Importable here, not in the workers (their sys.path lacks tmp_path)."""
    (tmp_path / "only_here.py").write_text(
        textwrap.dedent(
            """
            from orchestrator import Trainable

            class OnlyHere(Trainable):
                def step(self):
                    return {}
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from only_here import OnlyHere  # type: ignore[import-not-found]

    async with Orchestrator(storage=tmp_path / "s", name="i", max_failures=-1) as orch:
        trial = orch.add_trial(OnlyHere, resources=CPU)
        await asyncio.wait_for(orch.run(), 60)
    assert trial.state is TrialState.ERROR
    assert trial.num_failures == 1  # not retried, although max_failures=-1
    message = str(trial.error)
    assert trial.id in message and "module 'only_here'" in message
    assert "sys.path" in message and "runtime_env" in message
    sys.modules.pop("only_here", None)


def test_a_hook_with_a_wrong_signature_is_refused_when_given(tmp_path: Path) -> None:
    class Wrong:
        def on_trial_result(self, trial: Trial) -> None:
            pass

    with pytest.raises(ConfigError) as caught:
        Orchestrator(storage=tmp_path, name="h", hooks=[Wrong()])
    message = str(caught.value)
    assert "Wrong.on_trial_result" in message and "on_trial_result(trial, result)" in message


async def test_a_recovered_trial_has_no_error_but_keeps_its_history(tmp_path: Path) -> None:
    async with Orchestrator(storage=tmp_path, name="rec", max_failures=2) as orch:
        trial = orch.add_trial(
            Recorder,
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


class Talks(Trainable):
    def step(self) -> dict[str, Any]:
        print("hello from step", flush=True)
        return {}


async def test_trainable_output_is_prefixed_with_its_trial(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    async with Orchestrator(storage=tmp_path, name="p") as orch:
        trial = orch.add_trial(Talks, stop={"training_iteration": 3}, resources=CPU)
        await orch.run()
        seen = ""

        def printed() -> bool:
            nonlocal seen
            seen += capfd.readouterr().out
            return "hello from step" in seen

        await wait_for(printed, 30)  # Ray forwards worker output in the background
    line = next(line for line in seen.splitlines() if "hello from step" in line)
    assert f"(trial {trial.id} pid=" in line


async def test_a_killed_trial_recovers_and_its_error_clears(tmp_path: Path) -> None:
    async with Orchestrator(storage=tmp_path, name="k", max_failures=1) as orch:
        trial = orch.add_trial(
            Recorder,
            {"delay": 0.02},
            stop={"training_iteration": 30},
            checkpoint_every=5,
            resources=CPU,
        )
        runner = asyncio.create_task(orch.run())
        await wait_for(lambda: len(trial.checkpoints) >= 1 and trial.last_result is not None)
        assert trial.last_result is not None
        kill_worker(trial.last_result["pid"])
        await wait_for(lambda: trial.num_failures == 1)
        await asyncio.wait_for(runner, 60)
    assert trial.state is TrialState.TERMINATED and trial.error is None
    assert len(trial.errors) == 1
