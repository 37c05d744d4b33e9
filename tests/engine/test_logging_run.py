"""The per-trial logs of an experiment on the fake Ray: they equal each trial's history (a late key
gets its column, a restore truncates them), and TensorBoard's own reader sees as many
points as results. (A remote experiment's logs: tests/storage/test_orchestrator_remote.py.)
Moved from ``tests/test_logging_ray.py``: only the Ray under them changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from orchestrator import Trial, TrialState

from ..support.fake_engine import MakeOrchestrator
from ..support.trainables import Counter

CPU = {"cpu": 0.25}


class LateKey(Counter):
    """Reports ``late`` from its fourth step on."""

    def step(self) -> dict[str, Any]:
        result = super().step()
        if self.count >= 4:
            result["late"] = self.count * 10
        return result


class RestoreOnce:
    done = False

    async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
        if result["training_iteration"] == 8 and not self.done:
            self.done = True
            await trial.restore(trial.checkpoints[0])  # iteration 3: 4..8 leave the logs


def scalars(logdir: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


async def test_logs_equal_the_history_through_a_late_key_and_a_restore(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="logs", hooks=[RestoreOnce()]) as orch:
        trial = orch.add_trial(
            LateKey,
            {"delay": 0.02, "lr": 0.1},
            stop={"training_iteration": 12},
            checkpoint_every=3,
            resources=CPU,
        )
        await orch.run()
    assert trial.state is TrialState.TERMINATED and trial.discarded_results >= 5
    folder = tmp_path / "logs" / trial.id
    lines = pd.read_json(folder / "result.json", lines=True)
    assert list(lines["training_iteration"]) == list(range(1, 13))
    csv = pd.read_csv(folder / "progress.csv")
    assert list(csv["training_iteration"]) == list(range(1, 13))
    assert csv["late"].isna().sum() == 3 and csv["late"].iloc[-1] == 120  # its own column
    assert json.loads((folder / "params.json").read_text()) == {"delay": 0.02, "lr": 0.1}
    points = scalars(folder, "count")
    assert [step for step, _ in points] == list(range(1, 13))  # the rollback purged 4..8
    assert [value for _, value in points] == [float(i) for i in range(1, 13)]


async def test_no_loggers_and_no_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="quiet", loggers=[], progress=False) as orch:
        trial = orch.add_trial(Counter, stop={"training_iteration": 3}, resources=CPU)
        await orch.run()
    assert not (tmp_path / "quiet" / trial.id).exists()  # no checkpoints, no logs
    assert "trials:" not in capsys.readouterr().out
