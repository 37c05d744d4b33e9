"""A finished run as Tune's tests read it: ``ExperimentAnalysis(path, default_metric,
default_mode)`` and ``Result.from_path`` from its directory alone, a ``Result``'s repr
without the automatic keys, a missing metric's best a ``RuntimeError``, and
``best_checkpoints`` the ``num_to_keep`` best by the score attribute."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from orchestrator import tune
from orchestrator.tune.error import TuneError
from orchestrator.tune.result import AUTO_RESULT_KEYS

pytestmark = pytest.mark.usefixtures("ray_local")

LOSSES = [5, 1, 3, 2, 4]


def reporting(config: dict[str, Any]) -> None:
    for loss in LOSSES:
        with tempfile.TemporaryDirectory() as d:
            Path(d, "loss").write_text(str(loss))
            tune.report(
                {"loss": loss * config["k"], "k": config["k"]},
                checkpoint=tune.Checkpoint.from_directory(d),
            )


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory, ray_cluster: Any) -> Any:
    """One finished run for the module's tests: they only read it (a move is a copy)."""
    keep = tune.CheckpointConfig(
        num_to_keep=2, checkpoint_score_attribute="loss", checkpoint_score_order="min"
    )
    return tune.Tuner(
        reporting,
        param_space={"k": tune.grid_search([1, 2])},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path_factory.mktemp("runs")),
            name="back",
            verbose=0,
            checkpoint_config=keep,
        ),
    ).fit()


def test_a_finished_run_reads_back_as_tune_reads_it(results: Any, tmp_path: Path) -> None:
    best = [sorted(m["loss"] for _, m in r.best_checkpoints) for r in results]
    assert sorted(best) == [[1, 2], [2, 4]]  # the two lowest, not the newest too
    text = repr(results[0])
    assert "loss" in text and not any(key in text for key in AUTO_RESULT_KEYS)
    with pytest.raises(RuntimeError, match="No best trial found for the given metric: acc"):
        results.get_best_result("acc", "max")

    analysis = tune.ExperimentAnalysis(
        results.experiment_path, default_metric="loss", default_mode="max"
    )
    assert analysis.best_config == {"k": 2}
    assert len(analysis.dataframe()) == 2 and len(analysis.trials) == 2

    again = tune.Result.from_path(results[1].path)
    assert again.config == results[1].config and again.metrics["loss"] == 4 * again.config["k"]
    assert again.checkpoint is not None

    with pytest.raises(TuneError, match="is not an experiment"):
        tune.ExperimentAnalysis(tmp_path / "nothing")
    with pytest.raises(TuneError, match="is not a trial of the experiment"):
        tune.Result.from_path(Path(results.experiment_path) / "nobody")


def test_a_moved_run_has_its_checkpoints_where_it_is_now(results: Any, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere"  # a copy: the checkpoints must be found in it
    shutil.copytree(results.experiment_path, moved, symlinks=True)
    for again in (
        tune.Tuner.restore(str(moved), reporting).get_results(),
        tune.ExperimentAnalysis(moved)._grid,
    ):
        for r in again:
            assert r.checkpoint is not None and r.checkpoint.path.startswith(str(moved))
            with r.checkpoint.as_directory() as d:
                assert Path(d, "loss").read_text() == "4"  # the newest: 5, 1, 3, 2, 4
