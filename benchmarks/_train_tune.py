"""``bench_train`` under Ray Tune + Ray Train, same Ray (run in a child process): Ray
2.60's documented pattern (``doc/source/train/doc_code/train_tune_interop.py``): a
function trainable that builds a ``TorchTrainer`` with
``ray.tune.integration.ray_train.TuneReportCallback`` and a run name from the trial id,
run by ``tune.Tuner`` with ``max_concurrent_trials``. The function asks for 0.01 CPU
(``tune.with_resources(fn, {"cpu": 0.01})``: Tune refuses a trial of no resources, and
its default of 1 CPU would leave no room for a gang on 2 CPUs; the docs' example gives
the function 0.01 of a custom resource). Tune's defaults otherwise.
"""

from __future__ import annotations

import tempfile
import time
from typing import Any

import ray
from ray import tune
from ray.tune.schedulers import ASHAScheduler

from ._core_common import NUM_CPUS
from ._shared import init_private_ray
from ._train_common import (
    LEARNING_RATES,
    Clock,
    figures,
    fit,
    space_constants,
    stamp_figures,
)
from ._train_stamps import CpuByProcess

#: The trial function's CPU (see the module's docstring); ``bench_train`` sizes the
#: workers so that a gang and this fit.
TRIAL_CPU = 0.01


def train_driver_fn(config: dict[str, Any]) -> None:
    """The trial: it only drives Train."""
    from ray.tune.integration.ray_train import TuneReportCallback

    fit(config, TuneReportCallback(), name=f"train-trial_id={tune.get_context().get_trial_id()}")


class ClockCallback(tune.Callback):
    """Stamps each trial's start and each result's arrival in Tune's controller."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def on_trial_start(self, iteration: int, trials: Any, trial: Any, **info: Any) -> None:
        self.clock.start(trial.trial_id)

    def on_trial_result(
        self, iteration: int, trials: Any, trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        self.clock.result(trial.trial_id, result)


def run(spec: dict[str, Any]) -> dict[str, Any]:
    clock = Clock()
    with tempfile.TemporaryDirectory(prefix="bench-train-tune-") as tmp:
        t0 = time.time()
        init_private_ray(NUM_CPUS)
        t_ray = time.time()
        sampler = CpuByProcess() if spec.get("profile") else None
        scheduler = (
            ASHAScheduler(max_t=spec["epochs"], grace_period=1, reduction_factor=2)
            if spec["scheduler"] == "asha"
            else None
        )
        tuner = tune.Tuner(
            tune.with_resources(train_driver_fn, {"cpu": TRIAL_CPU}),
            param_space={
                "lr": tune.grid_search(list(LEARNING_RATES[: spec["trials"]])),
                **space_constants(spec, f"{tmp}/train"),
            },
            tune_config=tune.TuneConfig(
                metric="loss",
                mode="min",
                scheduler=scheduler,
                max_concurrent_trials=spec["concurrency"],
            ),
            run_config=tune.RunConfig(
                name="bench",
                storage_path=f"{tmp}/runs",
                callbacks=[ClockCallback(clock)],
                verbose=0,
            ),
        )
        grid = tuner.fit()
        t_end = time.time()
        cpu = sampler.stop() if sampler is not None else None
        results = [grid[i] for i in range(len(grid))]
        errors = sum(r.error is not None for r in results)
        checkpoints = sum(1 for r in results if r.metrics and r.metrics.get("checkpoint_path"))
        stamps = stamp_figures(spec, f"{tmp}/train")
        ray.shutdown()
    return figures(
        spec,
        clock,
        t0=t0,
        t_ray=t_ray,
        t_end=t_end,
        errors=errors,
        checkpoints=checkpoints,
        extra={"cpu_s": cpu, **stamps},
    )
