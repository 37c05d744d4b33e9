"""``setup_mlflow`` and ``setup_wandb`` (the facade's, in a trainable) called by one of
trialflow's own function trainables on the fake Ray: each trial gets one run, named
after it, with its config, and a trial that fails once and restarts gets the same run
again (real MLflow on sqlite, W&B offline; read back)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from orchestrator import TrialState
from orchestrator.integrations.wandb import run_id_for
from orchestrator.tune.integration.mlflow import setup_mlflow
from orchestrator.tune.integration.wandb import setup_wandb

from ..support.fake_engine import MakeOrchestrator
from ..support.trackers import read_mlflow, read_wandb

CPU = {"cpu": 0.25}


pytestmark = pytest.mark.usefixtures("wandb_offline")


def tracked(config: dict[str, Any]) -> None:
    from orchestrator import report

    mlflow = setup_mlflow(config, tracking_uri=config["uri"], experiment_name="setup")
    run = setup_wandb(config, project="p", dir=config["dir"])
    for step in range(1, 6):
        flag = os.path.join(config["dir"], f"{config['name']}.failed")
        if step == 3 and config["fail"] and not os.path.exists(flag):
            open(flag, "w").close()
            raise RuntimeError("one failure")
        mlflow.log_metric("m", float(step), step=step)
        run.log({"w": step}, step=step)
        report({"count": step})
    run.finish()
    mlflow.end_run()


async def test_setup_functions_give_a_trial_one_run_even_after_a_restart(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowClient(uri).create_experiment("setup")  # its tables made once, before the trials
    async with orchestrator(
        storage=tmp_path / "runs", name="x", progress=False, max_failures=1, failure_backoff=0
    ) as orch:
        trials = [
            orch.add_trial(
                tracked,
                {"uri": uri, "dir": str(tmp_path), "name": name, "fail": name == "fails"},
                trial_id=name,
                resources=CPU,
            )
            for name in ("fails", "plain")
        ]
        await orch.run()
    assert all(t.state is TrialState.TERMINATED for t in trials)
    assert trials[0].num_failures == 1

    runs = read_mlflow(uri, "setup")  # it refuses two runs for one trial
    assert sorted(runs) == ["fails", "plain"]
    for name, run in runs.items():
        assert run.name == name and run.params["name"] == name
        assert run.steps("m")[-1] == 5
    stored = read_wandb(tmp_path)
    assert sorted(stored) == sorted(run_id_for("p", None, n) for n in ("fails", "plain"))
    for name in ("fails", "plain"):
        run = stored[run_id_for("p", None, name)]
        assert run.name == name and run.params["name"] == name and run.segments == 1
        assert run.steps("w")[-1] == 5
