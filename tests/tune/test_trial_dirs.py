"""Where a trial works, as on Tune: its function (or class) runs in its trial's
directory (files written by relative path land beside its results; the directory left
is in ``TUNE_ORIG_WORKING_DIR``), a ``trial_dirname_creator``'s name is the result's
``path``, and ``num_samples=-1`` samples until the run is stopped."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from orchestrator import tune

pytestmark = pytest.mark.usefixtures("ray_local")


def writes_here(config: dict[str, Any]) -> None:
    Path("note.txt").write_text(str(config["a"]))
    tune.report({"orig": os.environ.get("TUNE_ORIG_WORKING_DIR", "")})


class WritesHere(tune.Trainable):
    def step(self) -> dict[str, Any]:
        Path("note.txt").write_text(str(self.config["a"]))
        return {"done": True}


@pytest.mark.parametrize("trainable", [writes_here, WritesHere])
def test_a_trial_runs_in_its_directory_named_by_the_creator(tmp_path: Path, trainable: Any) -> None:
    results = tune.Tuner(
        trainable,
        param_space={"a": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(trial_dirname_creator=lambda t: f"mine_{t.config['a']}"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="dirs", verbose=0),
    ).fit()
    assert sorted(os.path.basename(r.path) for r in results) == ["mine_1", "mine_2"]
    for r in results:
        assert Path(r.path, "note.txt").read_text() == str(r.config["a"])
        if trainable is writes_here:
            assert r.metrics["orig"]  # the directory the worker started in


def test_num_samples_minus_one_samples_until_the_budget_ends(tmp_path: Path) -> None:
    def quick(config: dict[str, Any]) -> None:
        tune.report({"x": config["x"]})

    results = tune.Tuner(
        quick,
        param_space={"x": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(num_samples=-1, time_budget_s=6),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="forever", verbose=0),
    ).fit()
    assert len(results) >= 1 and results.num_errors == 0
