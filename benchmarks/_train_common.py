"""What both systems of ``bench_train`` run alike: the Train workers' loop, the trial's
``TorchTrainer``, and one run's figures from the same raw timings.

Every clock is ``time.time()`` on this one machine, so the workers' stamps and the
driver's can be subtracted. Rank 0 stamps each report with ``t_loop`` (when its train
loop started) and ``t_report`` (just before ``ray.train.report``); the driver records
when each trial started and when each result reached it (ours: an async hook; Tune: a
``Callback``: both on the driver's event loop, as their own bookkeeping is).

Why the loop's start is "the gang placed": it is the first moment both systems share
that comes after the worker group is placed, its actors started and torch's process
group set up (all Ray Train's, the same code for both), and it is measured by the same
line of the same function. A ``WorkerGroupCallback`` would sit in Train's controller
and Tune's side would need one of Train's developer interfaces it does not otherwise
use; the loop's stamp needs nothing but the metrics both already carry. What comes
after it is the first epoch (the same work for both) and the report's way to the
driver, which is where the two systems differ.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tests.support.train_runs import report_epoch, restored_state

#: Learning rates of the sweep's trials (a grid: both systems run the same configs).
LEARNING_RATES = (0.003, 0.01, 0.03, 0.1, 0.3, 0.6, 1.0, 1.5)


def train_loop(config: dict[str, Any]) -> None:
    """Each Train worker: DDP over a small MLP on synthetic data, ``steps`` batches an
    epoch, an all-reduce of the ranks, rank 0 checkpoints every epoch."""
    t_loop = time.time()
    import ray.train
    import ray.train.torch
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    rank = ray.train.get_context().get_world_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    start = restored_state(model).get("epoch", 0)
    model = ray.train.torch.prepare_model(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    data = torch.Generator().manual_seed(rank)
    inputs = torch.randn(256, 16, generator=data)
    targets = inputs.sum(dim=1, keepdim=True).sin()
    for epoch in range(start, config["epochs"]):
        for batch in range(config["steps"]):
            rows = slice((batch * 32) % 256, (batch * 32) % 256 + 32)
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(inputs[rows]), targets[rows])
            loss.backward()
            optimizer.step()
        ranks = torch.tensor([float(rank + 1)])
        dist.all_reduce(ranks)  # 1 + 2 with two workers: the ranks really talk
        metrics = {
            "epoch": epoch + 1,
            "loss": float(loss.item()),
            "ranks": float(ranks.item()),
            "t_fn": config["t_fn"],
            "t_loop": t_loop,
            "t_report": time.time(),
        }
        state = {"epoch": epoch + 1, "model": model.module.state_dict()}
        report_epoch(metrics, state if rank == 0 else None)


def fit(config: dict[str, Any], callback: Any, name: str | None = None) -> None:
    """The trial's function body: a ``TorchTrainer`` of ``train_loop`` on
    ``config["workers"]`` workers of ``config["worker_cpu"]`` CPUs, reporting through
    ``callback`` (and ``_train_stamps``' probe with ``config["profile"]``); Train's
    storage under ``config["train_storage"]``."""
    t_fn = time.time()
    import ray.train
    from ray.train.torch import TorchTrainer

    callbacks = [callback]
    if config.get("profile"):
        from ._train_stamps import StampCallback

        callbacks.append(StampCallback(config["train_storage"], t_fn))
    TorchTrainer(
        train_loop,
        train_loop_config={**config, "t_fn": t_fn},
        scaling_config=ray.train.ScalingConfig(
            num_workers=config["workers"], resources_per_worker={"CPU": config["worker_cpu"]}
        ),
        run_config=ray.train.RunConfig(
            name=name,
            storage_path=config["train_storage"],
            callbacks=callbacks,
            checkpoint_config=ray.train.CheckpointConfig(num_to_keep=1),
        ),
    ).fit()


def space_constants(spec: Mapping[str, Any], train_storage: str) -> dict[str, Any]:
    """The config keys every trial shares (the learning rate is the grid)."""
    return {
        "epochs": spec["epochs"],
        "steps": spec["steps"],
        "workers": spec["workers"],
        "worker_cpu": spec["worker_cpu"],
        "train_storage": train_storage,
        "profile": bool(spec.get("profile")),
    }


class Clock:
    """The driver's side of the timings: when each trial started and when each of its
    results arrived, keyed by the system's trial id."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.arrived: dict[str, list[tuple[float, Mapping[str, Any]]]] = {}

    def start(self, trial_id: str) -> None:
        self.started.setdefault(trial_id, time.time())

    def result(self, trial_id: str, result: Mapping[str, Any]) -> None:
        self.arrived.setdefault(trial_id, []).append((time.time(), dict(result)))


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def figures(
    spec: Mapping[str, Any],
    clock: Clock,
    *,
    t0: float,
    t_ray: float,
    t_end: float,
    errors: int,
    checkpoints: int,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One run's figures (seconds; medians over its trials where per trial):

    * ``e2e_s``: before Ray starts to the sweep's end; ``sweep_s``: once Ray is up.
    * ``placed_to_first_s``: rank 0's loop start to the first result at the driver.
    * ``report_to_driver_s``: rank 0's first ``report`` call to its arrival at the driver.
    * ``start_to_placed_s``: the trial's start (driver) to rank 0's loop start: the
      trial's actor, Train's controller and worker group, torch's process group; split
      into ``start_to_fn_s`` (to the trial's function calling ``fit``: the trial's
      actor) and ``fn_to_placed_s`` (the rest: Train's).
    * ``last_to_next_start_s``: a trial's last result to the next trial's start (the
      gap between gangs when they run one after another).
    """
    placed: list[float] = []
    relay: list[float] = []
    start: list[float] = []
    to_fn: list[float] = []
    fn_to_loop: list[float] = []
    lasts: list[float] = []
    results = 0
    ranks_ok = True
    expected_ranks = spec["workers"] * (spec["workers"] + 1) / 2  # the all-reduce of rank + 1
    for trial_id, arrivals in clock.arrived.items():
        results += len(arrivals)
        ranks_ok = ranks_ok and all(r.get("ranks") == expected_ranks for _, r in arrivals)
        arrived, first = arrivals[0]
        placed.append(arrived - first["t_loop"])
        relay.append(arrived - first["t_report"])
        fn_to_loop.append(first["t_loop"] - first["t_fn"])
        if trial_id in clock.started:
            start.append(first["t_loop"] - clock.started[trial_id])
            to_fn.append(first["t_fn"] - clock.started[trial_id])
        lasts.append(arrivals[-1][0])
    firsts = sorted(clock.started.values())
    gaps = [b - a for a, b in zip(sorted(lasts), firsts[1:], strict=False) if b > a]
    complete = len(clock.arrived) == spec["trials"]
    out = {
        "ok": errors == 0 and complete and ranks_ok,
        "e2e_s": t_end - t0,
        "ray_up_s": t_ray - t0,
        "sweep_s": t_end - t_ray,
        "placed_to_first_s": _median(placed),
        "report_to_driver_s": _median(relay),
        "start_to_placed_s": _median(start),
        "start_to_fn_s": _median(to_fn),
        "fn_to_placed_s": _median(fn_to_loop),
        "last_to_next_start_s": _median(gaps),
        "results": results,
        "trials_reported": len(clock.arrived),
        "checkpoints": checkpoints,
        "errors": errors,
        "ranks_ok": ranks_ok,
    }
    if extra:
        out.update(extra)
    return out


def stamp_figures(spec: Mapping[str, Any], train_storage: str) -> dict[str, float | None]:
    """Medians over the runs' Train start-up steps (``_train_stamps``): the trial's
    function building the trainer -> Train's controller started -> its worker group
    starting (placement group asked) -> started (placed, workers up); and the whole
    ``fit()`` in the controller (to its finish)."""
    if not spec.get("profile"):
        return {}
    from ._train_stamps import read_stamps

    runs = read_stamps(train_storage)

    def phase(a: str, b: str) -> float | None:
        return _median([r[b] - r[a] for r in runs if a in r and b in r])

    return {
        "fn_to_controller_s": phase("t_fn", "controller_started"),
        "controller_to_group_s": phase("controller_started", "group_starting"),
        "group_start_s": phase("group_starting", "group_started"),
        "fit_s": phase("t_fn", "finished"),
    }
