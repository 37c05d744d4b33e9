"""Ray Train's ``XGBoostTrainer`` inside a trial, on the session's Ray: 2 workers, each
boosting on its own shard of synthetic data made here (no Ray Data), XGBoost's
collective set up by Train. Rank 0's reports (Ray Train's own XGBoost callback, one a
round, a booster every other round) arrive as the trial's results and checkpoints, the
checkpoints go through the trial's storage and retention, and the workers really
communicate (XGBoost's own all-reduce)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("xgboost")
pytest.importorskip("ray.train.xgboost")

from orchestrator import Orchestrator, TrialState  # noqa: E402

from ..support.train_runs import TRAIN_TIMEOUT_S, wait_gangs_released  # noqa: E402

ROUNDS = 4


def boost_loop(config: dict[str, Any]) -> None:
    """Each Train worker: its shard of a synthetic regression, ``ROUNDS`` rounds."""
    import numpy as np
    import ray.train
    import xgboost
    from ray.train.xgboost import RayTrainReportCallback

    rank = ray.train.get_context().get_world_rank()
    data = np.random.default_rng(rank)
    features = data.normal(size=(64, 3))
    labels = features @ np.array([1.0, -2.0, 0.5])
    train = xgboost.DMatrix(features, label=labels)
    # Rank 1's all-reduce contribution is 2: 1 + 2 only when both ranks take part.
    ranks = xgboost.collective.allreduce(np.array([rank + 1.0]), xgboost.collective.Op.SUM)
    xgboost.train(
        {"objective": "reg:squarederror", "tree_method": "hist", "max_depth": 2, "nthread": 1},
        train,
        num_boost_round=ROUNDS,
        evals=[(train, "train")],
        callbacks=[
            RayTrainReportCallback(
                metrics={"rmse": "train-rmse"}, frequency=2, checkpoint_at_end=False
            )
        ],
    )
    ray.train.report({"ranks": float(ranks[0]), "world": xgboost.collective.get_world_size()})


def boost_trial(config: dict[str, Any]) -> None:
    import ray.train
    from ray.train.xgboost import XGBoostTrainer

    from orchestrator.integrations.ray_train import TrialReportCallback

    XGBoostTrainer(
        boost_loop,
        train_loop_config=config,
        scaling_config=ray.train.ScalingConfig(num_workers=2),
        run_config=ray.train.RunConfig(
            storage_path=config["train_storage"], callbacks=[TrialReportCallback()]
        ),
    ).fit()


@pytest.mark.slow
@pytest.mark.timeout(TRAIN_TIMEOUT_S)
@pytest.mark.usefixtures("ray_local")
async def test_an_xgboost_trainer_reports_its_rounds_and_boosters(tmp_path: Path) -> None:
    from ray.train.xgboost import RayTrainReportCallback

    config = {"train_storage": str(tmp_path / "train")}
    async with Orchestrator(storage=tmp_path / "runs", name="xgb") as orch:
        trial = orch.add_trial(boost_trial, config, resources={"cpu": 0}, keep_checkpoints=1)
        await orch.run()

    assert trial.state is TrialState.TERMINATED, trial.error
    rounds, last = trial.results[:ROUNDS], trial.results[ROUNDS]
    assert len(trial.results) == ROUNDS + 1
    assert all("rmse" in r for r in rounds), rounds  # rank 0's, one a round
    assert rounds[-1]["rmse"] < rounds[0]["rmse"]
    assert last["ranks"] == 3.0 and last["world"] == 2  # XGBoost's collective spans both
    # The boosters of rounds 2 and 4 went through the trial's storage; the newest is kept.
    assert [c.iteration for c in trial.checkpoints] == [4]
    latest = trial.latest_checkpoint
    assert latest is not None and latest.path is not None
    import ray.train

    booster = RayTrainReportCallback.get_model(ray.train.Checkpoint.from_directory(latest.path))
    assert booster.num_boosted_rounds() == ROUNDS
    kept = [p.name for p in Path(latest.path).parent.iterdir() if p.name.startswith("checkpoint_")]
    assert kept == [Path(latest.path).name], kept
    wait_gangs_released()
