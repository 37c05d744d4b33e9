"""The scheduler workloads under Ray Tune's own schedulers, same Ray (run in a child).

ASHA: ``AsyncHyperBandScheduler(time_attr="training_iteration", max_t=81,
grace_period=1, reduction_factor=3)``, metric and mode in ``TuneConfig``, the 64 curves
by ``tune.grid_search`` over their index. PBT: ``PopulationBasedTraining`` as in
``tune/examples/pbt_example.py`` (perturbation_interval and the run's length from the
spec), ``CheckpointConfig(checkpoint_frequency=interval)`` with Tune's default retention
(``num_to_keep=None``: every checkpoint kept). ``reuse_actors`` is True exactly when the
trainable has a ``reset_config``.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import ray
from ray import tune
from ray.tune.schedulers import AsyncHyperBandScheduler, PopulationBasedTraining

from ._core_common import NUM_CPUS
from ._sched_common import GRACE, MAX_T, RF
from ._sched_figures import asha_figures, pbt_figures
from ._shared import init_private_ray
from ._twin_steps import CurveSteps, PBTToyResetSteps, PBTToySteps


class TuneCurve(CurveSteps, tune.Trainable):
    """``_twin_steps.CurveSteps`` for Tune (with a ``reset_config``, for actor reuse)."""

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        self.i = 0
        return True


class TunePBTToyNoReset(PBTToySteps, tune.Trainable):
    """``PBTBenchmarkExample`` without ``reset_config`` (an exploit starts a new actor)."""


class TunePBTToy(PBTToyResetSteps, tune.Trainable):
    """``PBTBenchmarkExample`` with its ``reset_config`` (returns True)."""


def _init() -> None:
    init_private_ray(NUM_CPUS)


def run_asha(spec: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-sched-tune-") as tmp:
        t0 = time.time()
        _init()
        t_ray = time.time()
        curves = spec["curves"]
        scheduler = AsyncHyperBandScheduler(
            time_attr="training_iteration", max_t=MAX_T, grace_period=GRACE, reduction_factor=RF
        )
        tuner = tune.Tuner(
            tune.with_resources(TuneCurve, {"cpu": spec["cpu"]}),
            param_space={
                "index": tune.grid_search(list(range(len(curves)))),
                "curves": curves,
                "step_s": spec["step_s"],
            },
            tune_config=tune.TuneConfig(
                metric="value",
                mode="max",
                scheduler=scheduler,
                max_concurrent_trials=spec["concurrency"],
                reuse_actors=True,
            ),
            run_config=tune.RunConfig(
                name="asha",
                storage_path=tmp,
                stop={"training_iteration": 10 * MAX_T},  # a guard only, as for ours
                verbose=0,
            ),
        )
        grid = tuner.fit()
        t_end = time.time()
        results = [grid[i] for i in range(len(grid))]
        lasts = [r.metrics or {} for r in results]
        best_config = grid.get_best_result(metric="value", mode="max", scope="last").config
        best = best_config["index"] if best_config else None
        errors = sum(r.error is not None for r in results)
        ray.shutdown()
        t_exit = time.time()
    return asha_figures(
        spec,
        t0=t0,
        t_ray=t_ray,
        t_end=t_end,
        t_exit=t_exit,
        lasts=lasts,
        best=best,
        errors=errors,
    )


def run_pbt(spec: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-sched-tune-") as tmp:
        log_dir = os.path.join(tmp, "events")
        os.makedirs(log_dir)
        random.seed(spec["seed"])  # Tune's PBT draws from the driver's `random`
        t0 = time.time()
        _init()
        t_ray = time.time()
        pbt = PopulationBasedTraining(
            time_attr="training_iteration",
            perturbation_interval=spec["interval"],
            hyperparam_mutations={
                "lr": lambda: random.uniform(0.0001, 0.02),
                "some_other_factor": [1, 2],
            },
        )
        tuner = tune.Tuner(
            tune.with_resources(
                TunePBTToy if spec["reset"] else TunePBTToyNoReset, {"cpu": spec["cpu"]}
            ),
            param_space={
                "lr": 0.0001,
                "some_other_factor": 1,
                "log_dir": log_dir,
                "step_s": spec.get("step_s", 0.0),
            },
            tune_config=tune.TuneConfig(
                scheduler=pbt,
                metric="mean_accuracy",
                mode="max",
                num_samples=spec["trials"],
                max_concurrent_trials=spec["concurrency"],
                reuse_actors=bool(spec["reset"]),
            ),
            run_config=tune.RunConfig(
                name="pbt",
                storage_path=tmp,
                stop={"done": True, "training_iteration": spec["iterations"]},
                checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=spec["interval"]),
                verbose=0,
            ),
        )
        grid = tuner.fit()
        t_end = time.time()
        results = [grid[i] for i in range(len(grid))]
        lasts = [r.metrics or {} for r in results]
        errors = [repr(r.error) for r in results if r.error is not None]
        kept = sum(1 for p in Path(tmp, "pbt").rglob("checkpoint_*") if p.is_dir())
        ray.shutdown()
        t_exit = time.time()
        return pbt_figures(
            spec,
            t0=t0,
            t_ray=t_ray,
            t_end=t_end,
            t_exit=t_exit,
            lasts=lasts,
            exploits=pbt._num_perturbations,
            errors=errors,
            log_dir=log_dir,
            extra={"checkpoints_kept": kept},
        )
