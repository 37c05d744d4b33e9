"""Ray's tracker integrations under the facade, on Ray, with the real MLflow (sqlite) and
W&B (offline): ``MLflowLoggerCallback`` (with ``save_artifact``) and
``WandbLoggerCallback`` in the driver, ``setup_mlflow`` in the trainable, one trial
raising once and restarted (``max_failures=1``); and ``ray.air.integrations.*``
resolved to them by ``python -m orchestrator tune``'s import alias."""

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
from orchestrator.integrations.tracker import ROLLBACK_METRIC
from orchestrator.integrations.wandb import run_id_for
from orchestrator.tune.integration.mlflow import MLflowLoggerCallback, setup_mlflow
from orchestrator.tune.integration.wandb import WandbLoggerCallback

from ..support.trackers import read_mlflow, read_wandb

CPU = {"cpu": 0.25}
STEPS = 5
#: The trial of this lr raises once, after reporting this step (it has no checkpoint:
#: restarted, it runs from the start).
FAILS, FAILS_AFTER = 0.1, 3


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
        flag = Path(config["fails"]) / "failed"
        if config["lr"] == FAILS and step == FAILS_AFTER and not flag.exists():
            flag.touch()
            raise RuntimeError("planned one-off failure")


@pytest.mark.usefixtures("ray_local", "wandb_ended")
def test_the_callbacks_and_setup_mlflow_give_each_trial_one_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    outside = f"sqlite:///{tmp_path / 'callback.db'}"
    inside = f"sqlite:///{tmp_path / 'inside.db'}"
    # Made here: two trials making one sqlite store's tables at once would race.
    MlflowClient(inside).create_experiment("inside")
    # With its artifacts here (a sqlite store's default is ./mlruns, in the repository).
    MlflowClient(outside).create_experiment("facade", (tmp_path / "artifacts").as_uri())
    grid = tune.Tuner(
        tune.with_resources(train, CPU),
        param_space={
            "lr": tune.grid_search([FAILS, 0.2]),
            "inside": inside,
            "fails": str(tmp_path),
        },
        tune_config=tune.TuneConfig(max_concurrent_trials=1),  # one worker: one MLflow import
        run_config=tune.RunConfig(
            storage_path=str(tmp_path / "runs"),
            name="facade",
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=1),
            callbacks=[
                MLflowLoggerCallback(
                    outside, experiment_name="facade", tags={"k": "v"}, save_artifact=True
                ),
                WandbLoggerCallback(project="p", dir=str(tmp_path), mode="offline"),
            ],
        ),
    ).fit()
    assert grid.num_errors == 0 and len(grid) == 2
    assert (tmp_path / "failed").exists()
    trial_ids = sorted(r.metrics["trial_id"] for r in grid)
    lrs = {r.metrics["trial_id"]: r.config["lr"] for r in grid}
    failed = next(t for t, lr in lrs.items() if lr == FAILS)
    assert not [r for r in caplog.records if "cannot be pickled" in r.getMessage()]

    runs = read_mlflow(outside, "facade")
    assert sorted(runs) == trial_ids
    for trial_id, run in runs.items():
        assert run.status == "FINISHED" and run.name.endswith(trial_id)  # Tune's trial name
        assert run.tags["k"] == "v" and float(run.params["lr"]) == lrs[trial_id]
        assert run.steps("loss") == list(range(1, STEPS + 1))
        assert run.steps("nested/acc") == list(range(1, STEPS + 1))
        assert "config/lr" not in run.metrics  # the config is params, not metrics
        # save_artifact: the trial's directory (its result logs) stored with its run.
        artifacts = {a.path for a in MlflowClient(outside).list_artifacts(run.run_id)}
        assert "result.json" in artifacts, artifacts
    # The restarted trial went on in its run: its re-run steps 1-3 were not sent again,
    # and step 4, the first new one, carries the mark (back to the start: 0).
    assert runs[failed].metrics[ROLLBACK_METRIC] == [(FAILS_AFTER + 1, 0.0)]
    assert ROLLBACK_METRIC not in runs[next(t for t in trial_ids if t != failed)].metrics

    mine = read_mlflow(inside, "inside")
    assert sorted(mine) == trial_ids  # the restarted trial's setup_mlflow found its run
    for trial_id, run in mine.items():
        # The trainable's own log calls are its own: the re-run logged 1-3 again.
        again = list(range(1, FAILS_AFTER + 1)) if trial_id == failed else []
        assert run.steps("inside") == sorted([*range(1, STEPS + 1), *again])
        assert run.status == "FINISHED"  # the failed trial's run went on and finished

    stored = read_wandb(tmp_path)
    assert sorted(stored) == sorted(run_id_for("p", "facade", t) for t in trial_ids)
    for trial_id in trial_ids:
        run = stored[run_id_for("p", "facade", trial_id)]
        assert run.group == "facade" and run.name.endswith(trial_id)
        assert run.params["lr"] == lrs[trial_id] and run.status == "FINISHED"
        assert run.steps("loss") == list(range(1, STEPS + 1))
        assert run.segments == 1  # the restarted trial's run was not reopened
    assert stored[run_id_for("p", "facade", failed)].metrics[ROLLBACK_METRIC] == [
        (FAILS_AFTER + 1, 0.0)
    ]


def ends(config: dict[str, Any]) -> dict[str, Any] | None:
    setup_mlflow(config, tracking_uri=config["uri"], experiment_name="ends")
    for step in range(1, 100):
        tune.report({"step": step})
        if config["how"] == "returns":
            return None
        if config["how"] == "raises":
            raise RuntimeError("planned failure")
    return None  # "stopped": the stop criterion ends it at step 2


@pytest.mark.usefixtures("ray_local")
def test_setup_mlflow_ends_its_run_as_the_trial_ends(tmp_path: Path) -> None:
    """A trial's function returning leaves its ``setup_mlflow`` run FINISHED, raising
    FAILED, stopped by the driver (here its stop criterion) KILLED, read back from the
    sqlite store: they were left RUNNING, as if still training."""
    uri = f"sqlite:///{tmp_path / 'ends.db'}"
    MlflowClient(uri).create_experiment("ends")  # made once (see above)
    grid = tune.Tuner(
        tune.with_resources(ends, CPU),
        param_space={"how": tune.grid_search(["returns", "raises", "stopped"]), "uri": uri},
        # One at a time: they reuse one worker, which imports MLflow once, not thrice.
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path / "runs"), name="ends", verbose=0,
            stop={"training_iteration": 2},
        ),
    ).fit()  # fmt: skip
    how = {r.metrics["trial_id"]: r.config["how"] for r in grid}
    assert sorted(how.values()) == ["raises", "returns", "stopped"] and grid.num_errors == 1
    runs = read_mlflow(uri, "ends")
    assert {how[t]: run.status for t, run in runs.items()} == {
        "returns": "FINISHED",
        "raises": "FAILED",
        "stopped": "KILLED",
    }


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
