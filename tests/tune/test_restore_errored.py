"""Tuner.restore's errored trials: ``resume_errored=True`` runs them again from their
newest checkpoint, ``restart_errored=True`` from scratch, neither leaves them as they
ended, as on Tune. A run whose trial errored has ended its sweep: the retried trials
still run (and nothing new is sampled)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from orchestrator import tune

pytestmark = pytest.mark.usefixtures("ray_local")


def counting(config: dict[str, Any]) -> None:
    """Counts to 4 with a checkpoint per step; the first attempt fails at step 3."""
    ckpt = tune.get_checkpoint()
    step = 0
    if ckpt is not None:
        with ckpt.as_directory() as d:
            step = json.loads(Path(d, "s.json").read_text())["step"]
    started = step
    while step < 4:
        step += 1
        if step == 3 and not os.path.exists(config["marker"]):
            Path(config["marker"]).touch()
            raise RuntimeError("first attempt fails")
        with tempfile.TemporaryDirectory() as d:
            Path(d, "s.json").write_text(json.dumps({"step": step}))
            tune.report(
                {"step": step, "started": started}, checkpoint=tune.Checkpoint.from_directory(d)
            )


def errored_run(tmp_path: Path) -> str:
    results = tune.Tuner(
        counting,
        param_space={"marker": str(tmp_path / "marker"), "x": tune.uniform(0, 1)},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="errs", verbose=0),
    ).fit()
    assert results.num_errors == 1
    return results.experiment_path


@pytest.mark.parametrize(
    ("flags", "errors", "started"),
    [({}, 1, None), ({"resume_errored": True}, 0, 2), ({"restart_errored": True}, 0, 0)],
)
def test_restore_retries_errored_trials(
    tmp_path: Path, flags: dict[str, bool], errors: int, started: int | None
) -> None:
    path = errored_run(tmp_path)
    results = tune.Tuner.restore(path, counting, **flags).fit()
    assert len(results) == 1 and results.num_errors == errors
    if started is not None:
        assert results[0].metrics["step"] == 4
        assert results[0].metrics["started"] == started
