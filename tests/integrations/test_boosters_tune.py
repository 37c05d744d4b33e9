"""XGBoost's and LightGBM's ``TuneReportCheckpointCallback`` through the facade, on the
session's real Ray: a trial that fails resumes from the booster its callback persisted,
the results carry Tune's keys, and ``get_model(result.checkpoint)`` gives the final
booster. The import paths are Ray Tune's (``ray.tune.integration.<framework>``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("xgboost")
pytest.importorskip("lightgbm")
pytest.importorskip("sklearn")

from orchestrator import tune  # noqa: E402

from . import experiments  # noqa: E402
from .boosters import lightgbm_train, xgboost_train  # noqa: E402

pytestmark = pytest.mark.usefixtures("ray_local")


@pytest.mark.parametrize("framework", ["xgboost", "lightgbm"])
def test_the_facades_callback_reports_checkpoints_and_resumes(
    tmp_path: Path, framework: str
) -> None:
    import importlib

    integration = importlib.import_module(f"orchestrator.tune.integration.{framework}")
    train = xgboost_train if framework == "xgboost" else lightgbm_train
    config = {"facade": True, "rounds": 6, "frequency": 2, "fail_at": 3, "marks": str(tmp_path)}
    result = experiments.fit_failing_once_on_ray(train, tmp_path, framework, "loss", config)
    history = result.metrics_dataframe
    assert list(history["training_iteration"]) == [1, 2, 3, 4, 5, 6]
    # Round 3's result was rolled back with the failure: 3-6 come from round 2's booster.
    assert list(history["resumed_from"]) == [0, 0, 2, 2, 2, 2]
    assert {"loss", "error", "time_since_restore", "done"} <= set(result.metrics)
    assert result.checkpoint is not None
    model = integration.TuneReportCheckpointCallback.get_model(result.checkpoint)
    done = model.num_boosted_rounds() if framework == "xgboost" else model.current_iteration()
    assert done == 6
    with pytest.raises(tune.TuneUnsupported, match="TuneReportCheckpointCallback"):
        integration.TuneReportCallback()
