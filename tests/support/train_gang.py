"""A distributed trial for the gang's fault tests (importable by Ray workers): a
2-worker ``TorchTrainer`` (gloo on CPU, a linear model on synthetic data) driven by a
trial's function through :class:`~orchestrator.integrations.ray_train.TrialReportCallback`.

Every epoch rank 0 reports, with a checkpoint: ``epoch``; ``start``, the epoch of the
checkpoint its run resumed from (0: fresh); ``score``, which grows by the config's
``lr`` each epoch and is part of the checkpointed state (so a restore or an exploit
shows in it); ``ranks``, an all-reduce of the ranks (3.0: both communicated); and
``nodes``, the Ray node of each rank (an all-gather).

Holds let a test act on a run at a known point, however slow the machine: config
``holds`` maps ``str(lr)`` (or ``"*"``, any lr) to ``[epoch, path]``: before training
that epoch (after reporting ``epoch`` epochs), each rank creates
``<path>.<name>.rank<r>`` (``name`` from the config) and waits until ``path`` exists.
A run that resumes past the epoch does not hold.
"""

from __future__ import annotations

import os
import time
from typing import Any

from .train_runs import report_epoch, restored_state

#: The trial's own actor only waits in fit(): the workers hold the CPUs.
DRIVER = {"cpu": 0}
#: A resource only the head node has (Ray's own): pins a trial's actor, and with it
#: Train's controller (placed on the node of the process calling fit()), to the head.
ON_HEAD = {"node:__internal_head__": 0.001}


def gang_loop(config: dict[str, Any]) -> None:
    """Each Train worker: DDP over a linear model, one small batch an epoch."""
    import ray
    import ray.train
    import ray.train.torch
    import torch
    import torch.distributed as dist

    rank = ray.train.get_context().get_world_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    restored = restored_state(model)
    start, score = restored.get("epoch", 0), restored.get("score", 0.0)
    model = ray.train.torch.prepare_model(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    inputs = torch.randn(32, 4, generator=torch.Generator().manual_seed(rank))
    targets = inputs @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    nodes: list[Any] = [None, None]
    dist.all_gather_object(nodes, ray.get_runtime_context().get_node_id())
    holds = config.get("holds", {})
    hold = holds.get(str(config.get("lr")), holds.get("*"))
    for epoch in range(start, config["epochs"]):
        if hold is not None and epoch == hold[0]:
            _wait_at(hold[1], f"{config.get('name', '')}.rank{rank}")
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
        ranks = torch.tensor([float(rank + 1)])
        dist.all_reduce(ranks)
        score += float(config.get("lr", 0.1))
        metrics = {
            "epoch": epoch + 1,
            "start": start,
            "score": score,
            "lr": config.get("lr"),
            "ranks": ranks.item(),
            "nodes": nodes,
        }
        state = {"epoch": epoch + 1, "score": score, "model": model.module.state_dict()}
        report_epoch(metrics, state if rank == 0 else None)


def gang_trial(config: dict[str, Any]) -> None:
    """The trial's function: a 2-worker TorchTrainer of :func:`gang_loop`; each worker
    asks for ``config["worker"]`` (default half a CPU), placed with
    ``config["placement"]`` (default PACK)."""
    import ray.train
    from ray.train.torch import TorchTrainer

    from orchestrator.integrations.ray_train import TrialReportCallback

    TorchTrainer(
        gang_loop,
        train_loop_config=config,
        scaling_config=ray.train.ScalingConfig(
            num_workers=2,
            resources_per_worker=config.get("worker", {"CPU": 0.5}),
            placement_strategy=config.get("placement", "PACK"),
        ),
        run_config=ray.train.RunConfig(
            storage_path=config["train_storage"], callbacks=[TrialReportCallback()]
        ),
    ).fit()


def live_gangs() -> list[dict[str, Any]]:
    """The cluster's placement groups not removed (Train's worker groups: the engine
    makes none)."""
    from ray.util import placement_group_table

    return [g for g in placement_group_table().values() if g["state"] != "REMOVED"]


def wait_gangs_released(timeout: float = 120.0) -> None:
    """Every placement group is removed: no gang outlives its run."""
    deadline = time.monotonic() + timeout
    while live := live_gangs():
        assert time.monotonic() < deadline, live
        time.sleep(0.5)


def held(path: str, name: str = "") -> int:
    """How many ranks of trial ``name`` wait at the hold on ``path``."""
    return sum(os.path.exists(f"{path}.{name}.rank{rank}") for rank in (0, 1))


def _wait_at(path: str, who: str) -> None:
    open(f"{path}.{who}", "w").close()
    while not os.path.exists(path):
        time.sleep(0.05)
