"""A Ray Train run as one trial (``orchestrator.integrations.ray_train``), on real Ray:
a ``TorchTrainer`` of 2 workers (gloo on CPU, a linear model on synthetic data made
here) inside a trial's function. Rank 0's reports arrive as the trial's results and
its checkpoints are persisted and garbage-collected by the trial's storage (S3 on moto
here: the sweep's test shows local storage); the ranks really communicate (an
all-reduce); a worker that raises once fails the trial once, which restarts from its
newest persisted checkpoint with a history that goes on without a gap or a repeat; a
stop criterion met mid-run ends Train's run (its abort).

Sized for a loaded 2-core machine: one trial at a time, a few tiny epochs; most of the
time is Ray Train starting its worker group.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("ray.train.torch")

from orchestrator import Orchestrator, TrialState  # noqa: E402
from orchestrator.errors import NotInTrial  # noqa: E402
from storage import MANIFEST_NAME, open_storage  # noqa: E402

from ..support.observe import wait_for  # noqa: E402
from ..support.servers import (  # noqa: E402, F401
    BUCKET,
    aws_env,
    boto3_client,
    moto_url,
    s3_runtime_env,
    unique_prefix,
)
from ..support.train_runs import (  # noqa: E402
    TRAIN_TIMEOUT_S,
    report_epoch,
    restored_state,
    saved_epoch,
    wait_gangs_released,
)

#: The trial's own actor only waits in fit(): the workers hold the CPUs.
DRIVER = {"cpu": 0}


def train_loop(config: dict[str, Any]) -> None:
    """Each Train worker: DDP over a linear model, one small batch an epoch."""
    import ray.train
    import ray.train.torch
    import torch
    import torch.distributed as dist

    context = ray.train.get_context()
    rank = context.get_world_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    start = restored_state(model).get("epoch", 0)
    model = ray.train.torch.prepare_model(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(rank)
    inputs = torch.randn(32, 4, generator=data)
    targets = inputs @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    for epoch in range(start, config["epochs"]):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
        ranks = torch.tensor([float(rank + 1)])
        dist.all_reduce(ranks)  # 1 + 2 with two workers
        marker = config.get("fail_once")
        if marker and epoch + 1 == config["fail_at"] and rank == 1:
            if not os.path.exists(marker):
                # Once the test has seen the trial persist the epoch before: the restart
                # then has that checkpoint to resume from, however slow the storage.
                while not os.path.exists(config["fail_when"]):
                    time.sleep(0.05)
                Path(marker).touch()
                raise RuntimeError("worker 1 fails once")
        metrics = {"epoch": epoch + 1, "loss": loss.item(), "ranks": ranks.item(), "start": start}
        state = {"epoch": epoch + 1, "model": model.module.state_dict()}
        report_epoch(metrics, state if rank == 0 else None)


def fit_two_workers(config: dict[str, Any], callback: Any) -> None:
    """A 2-worker TorchTrainer of ``train_loop``, reporting through ``callback``."""
    import ray.train
    from ray.train.torch import TorchTrainer

    TorchTrainer(
        train_loop,
        train_loop_config=config,
        scaling_config=ray.train.ScalingConfig(num_workers=2),
        run_config=ray.train.RunConfig(storage_path=config["train_storage"], callbacks=[callback]),
    ).fit()


def distributed_trial(config: dict[str, Any]) -> None:
    """The trial's function: drives a 2-worker TorchTrainer."""
    from orchestrator.integrations.ray_train import TrialReportCallback

    fit_two_workers(config, TrialReportCallback())


@pytest.mark.slow
@pytest.mark.timeout(TRAIN_TIMEOUT_S)
@pytest.mark.usefixtures("ray_local")
async def test_a_train_run_reports_checkpoints_to_s3_and_restarts_from_the_newest(
    tmp_path: Path,
    moto_url: str,  # noqa: F811
) -> None:
    """On S3 (moto), what the storage driver adds to a Train run: rank 0's checkpoints
    are uploaded and collected there, and the restart downloads the newest one for the
    workers. (The sweep's test shows the same on local storage.)"""
    prefix = unique_prefix()
    fail_when = tmp_path / "persisted"
    config = {
        "epochs": 4,
        "fail_at": 3,
        "fail_once": str(tmp_path / "failed-once"),
        "fail_when": str(fail_when),
        "train_storage": str(tmp_path / "train"),
    }
    async with Orchestrator(
        storage=f"s3://{BUCKET}/{prefix}",
        name="train",
        max_failures=1,
        storage_options={"endpoint_url": moto_url},
        runtime_env=s3_runtime_env(),
    ) as orch:
        trial = orch.add_trial(distributed_trial, config, resources=DRIVER, keep_checkpoints=1)
        runner = asyncio.create_task(orch.run())
        await wait_for(
            lambda: getattr(trial.latest_checkpoint, "iteration", 0) == 2,
            timeout=TRAIN_TIMEOUT_S - 200,
        )
        fail_when.touch()  # worker 1 fails in epoch 3
        await runner
        await asyncio.sleep(0.5)  # background GC

    assert trial.state is TrialState.TERMINATED, trial.error
    assert (tmp_path / "failed-once").exists() and trial.num_failures == 1
    epochs = [r["epoch"] for r in trial.results]
    assert epochs == [1, 2, 3, 4], epochs  # no gap, no repeat across the restart
    assert [r["training_iteration"] for r in trial.results] == epochs
    assert all(r["ranks"] == 3.0 for r in trial.results)  # rank 0's, after the all-reduce
    # The restart resumed from the newest checkpoint persisted (epoch 2's, from S3).
    assert [r["start"] for r in trial.results] == [0, 0, 2, 2], trial.results
    # Rank 0's checkpoints went to S3 through the trial's storage, kept as asked (the
    # newest only): one manifest left under the trial, the newest's, holding epoch 4.
    latest = trial.latest_checkpoint
    assert latest is not None and latest.iteration == 4 and latest.path is None
    assert [c.iteration for c in trial.checkpoints] == [4]
    assert latest.uri == f"s3://{BUCKET}/{prefix}/train/{latest.key}"
    s3 = boto3_client(moto_url)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]]
    manifests = sorted(
        k for k in keys if k.startswith(f"{prefix}/train/{trial.id}/") and k.endswith(MANIFEST_NAME)
    )
    assert manifests == [f"{prefix}/train/{latest.key}/{MANIFEST_NAME}"], manifests
    # Its files are content-addressed blobs the manifest names: read through the storage.
    with tempfile.TemporaryDirectory() as directory:
        await _download(f"s3://{BUCKET}/{prefix}/train", moto_url, latest.key, directory)
        assert saved_epoch(directory) == 4
    wait_gangs_released()


async def _download(uri: str, endpoint_url: str, key: str, directory: str) -> None:
    async with open_storage(uri, endpoint_url=endpoint_url) as store:
        await store.get_checkpoint(key, directory)


def tune_trial(config: dict[str, Any]) -> None:
    """Ray's documented ``train_driver_fn``, with the facade's callback."""
    from orchestrator.tune.integration.ray_train import TuneReportCallback

    fit_two_workers(config, TuneReportCallback())


@pytest.mark.slow
@pytest.mark.timeout(TRAIN_TIMEOUT_S)
@pytest.mark.usefixtures("ray_local")
def test_the_facade_stops_a_train_run_by_its_stop_criterion(tmp_path: Path) -> None:
    from orchestrator import tune

    config = {"epochs": 50, "train_storage": str(tmp_path / "train")}
    results = tune.Tuner(
        tune.with_resources(tune_trial, DRIVER),
        param_space=config,
        run_config=tune.RunConfig(
            storage_path=str(tmp_path / "runs"), name="tune-train", stop={"epoch": 2}, verbose=0
        ),
    ).fit()
    result = results[0]
    assert result.error is None and result.metrics["epoch"] == 2
    assert "time_since_restore" in result.metrics  # reported through tune.report
    assert result.checkpoint is not None
    with result.checkpoint.as_directory() as directory:
        assert saved_epoch(directory) == 2
    wait_gangs_released()  # the callback had Train abort its run (its workers and gang)


def test_tuner_refuses_a_train_trainer_with_the_rewrite() -> None:
    import ray.train
    from ray.train.torch import TorchTrainer

    from orchestrator import tune
    from orchestrator.tune.error import TuneUnsupported

    trainer = TorchTrainer(train_loop, scaling_config=ray.train.ScalingConfig(num_workers=2))
    with pytest.raises(TuneUnsupported, match="build and fit the trainer in a function"):
        tune.Tuner(trainer).fit()


def test_the_callback_is_built_in_a_trial() -> None:
    from orchestrator.integrations.ray_train import TrialReportCallback

    with pytest.raises(NotInTrial, match="TrialReportCallback"):
        TrialReportCallback()


def test_the_facade_covers_ray_train_and_names_what_it_covers_for_others() -> None:
    import importlib

    from orchestrator.tune.integration import ray_train

    assert ray_train.TuneReportCallback.__mro__[1].__name__ == "TrialReportCallback"
    with pytest.raises(ImportError, match="ray_train, xgboost, lightgbm, pytorch_lightning"):
        importlib.import_module("orchestrator.tune.integration.horovod")
