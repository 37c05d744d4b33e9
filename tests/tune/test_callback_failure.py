"""A Tune callback that raises ends the run as on Tune: ``fit()`` raises the callback's
own exception, no callback is called after it, and ``Tuner.restore`` continues the
trials it left unfinished from their checkpoints."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from orchestrator import tune


def counting(config: dict[str, Any]) -> None:
    """Counts to 4 with a checkpoint each step, from its checkpoint when it has one."""
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        start = int(Path(checkpoint.path, "n").read_text())
    for n in range(start + 1, 5):
        with tempfile.TemporaryDirectory() as directory:
            Path(directory, "n").write_text(str(n))
            tune.report({"n": n, "start": start}, checkpoint=tune.Checkpoint(directory))


class BreaksOnce(tune.Callback):
    """Raises at the second result while its marker file exists."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.calls_after: list[str] = []
        self.broke = False

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        if self.broke:
            self.calls_after.append("result")
        elif info["result"]["n"] == 2 and os.path.exists(self.marker):
            self.broke = True
            raise KeyError("the callback's own error")

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        if self.broke:
            self.calls_after.append("complete")


def test_a_failing_callback_fails_fit_and_restore_continues(tmp_path: Path, ray_local: Any) -> None:
    marker = tmp_path / "break"
    marker.touch()
    callback = BreaksOnce(str(marker))
    tuner = tune.Tuner(
        tune.with_resources(counting, {"cpu": 0.25}),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="breaks", callbacks=[callback], verbose=0
        ),
    )
    with pytest.raises(KeyError, match="the callback's own error"):
        tuner.fit()
    assert callback.calls_after == []
    marker.unlink()
    restored = tune.Tuner.restore(
        str(tmp_path / "breaks"), tune.with_resources(counting, {"cpu": 0.25})
    )
    result = restored.fit()[0]
    assert result.error is None and result.metrics["n"] == 4
    assert result.metrics["start"] >= 1  # continued from a checkpoint of the first run
