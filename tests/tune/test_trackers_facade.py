"""Ray's tracker integrations under the facade, on Ray, with the real MLflow (sqlite) and
W&B (offline): ``MLflowLoggerCallback`` and ``WandbLoggerCallback`` in the driver,
``setup_mlflow`` in the trainable; and ``ray.air.integrations.*`` resolved to them by
``python -m orchestrator tune``'s import alias."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from orchestrator import tune
from orchestrator.integrations.wandb import run_id_for
from orchestrator.tune.integration.mlflow import MLflowLoggerCallback, setup_mlflow
from orchestrator.tune.integration.wandb import WandbLoggerCallback

from ..trackers import read_mlflow, read_wandb

CPU = {"cpu": 0.25}
STEPS = 5


@pytest.fixture
def wandb_ended() -> Iterator[None]:
    """The W&B service this process started is ended after the test."""
    yield
    if "wandb" in sys.modules:
        sys.modules["wandb"].teardown()


def train(config: dict[str, Any]) -> None:
    mlflow = setup_mlflow(
        config, tracking_uri=config["inside"], experiment_name="inside",
        create_experiment_if_not_exists=True,
    )  # fmt: skip
    for step in range(1, STEPS + 1):
        mlflow.log_metric("inside", float(step), step=step)
        tune.report({"loss": config["lr"] / step, "nested": {"acc": step / 10}})


@pytest.mark.usefixtures("ray_local", "wandb_ended")
def test_the_callbacks_and_setup_mlflow_give_each_trial_one_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    outside = f"sqlite:///{tmp_path / 'callback.db'}"
    inside = f"sqlite:///{tmp_path / 'inside.db'}"
    # Made here: two trials making one sqlite store's tables at once would race.
    MlflowClient(inside).create_experiment("inside")
    grid = tune.Tuner(
        tune.with_resources(train, CPU),
        param_space={"lr": tune.grid_search([0.1, 0.2]), "inside": inside},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path / "runs"),
            name="facade",
            verbose=0,
            callbacks=[
                MLflowLoggerCallback(outside, experiment_name="facade", tags={"k": "v"}),
                WandbLoggerCallback(project="p", dir=str(tmp_path), mode="offline"),
            ],
        ),
    ).fit()
    assert grid.num_errors == 0 and len(grid) == 2
    trial_ids = sorted(r.metrics["trial_id"] for r in grid)
    lrs = {r.metrics["trial_id"]: r.config["lr"] for r in grid}
    assert not [r for r in caplog.records if "cannot be pickled" in r.getMessage()]

    runs = read_mlflow(outside, "facade")
    assert sorted(runs) == trial_ids
    for trial_id, run in runs.items():
        assert run.status == "FINISHED" and run.name.endswith(trial_id)  # Tune's trial name
        assert run.tags["k"] == "v" and float(run.params["lr"]) == lrs[trial_id]
        assert run.steps("loss") == list(range(1, STEPS + 1))
        assert run.steps("nested/acc") == list(range(1, STEPS + 1))
        assert "config/lr" not in run.metrics  # the config is params, not metrics

    mine = read_mlflow(inside, "inside")
    assert sorted(mine) == trial_ids
    for run in mine.values():
        assert run.steps("inside") == list(range(1, STEPS + 1))

    stored = read_wandb(tmp_path)
    assert sorted(stored) == sorted(run_id_for("p", "facade", t) for t in trial_ids)
    for trial_id in trial_ids:
        run = stored[run_id_for("p", "facade", trial_id)]
        assert run.group == "facade" and run.name.endswith(trial_id)
        assert run.params["lr"] == lrs[trial_id] and run.status == "FINISHED"
        assert run.steps("loss") == list(range(1, STEPS + 1))


def test_the_script_alias_maps_ray_air_integrations_onto_the_facade() -> None:
    code = (
        "from orchestrator.tune.alias import install; install()\n"
        "from ray.air.integrations.mlflow import MLflowLoggerCallback, setup_mlflow\n"
        "from ray.air.integrations.wandb import WandbLoggerCallback, setup_wandb\n"
        "import ray.air.integrations.mlflow as m\n"
        "print(m.__name__, MLflowLoggerCallback.__module__, WandbLoggerCallback.__module__)\n"
        "import sys; print('mlflow' in sys.modules, 'wandb' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == [
        "orchestrator.tune.integration.mlflow",
        "orchestrator.tune.integration.mlflow",
        "orchestrator.tune.integration.wandb",
        "False",  # the libraries load only when a run needs them
        "False",
    ]
