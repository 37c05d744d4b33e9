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

import json
import logging
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
from ._sched_common import GRACE, MAX_T, RF, EventLog, curve_value, pbt_toy_step
from ._sched_figures import asha_figures, pbt_figures


class TuneCurve(tune.Trainable):
    """The same trainable as ``_sched_ours.CurveTrainable``, for Tune."""

    def setup(self, config: dict[str, Any]) -> None:
        self.i = 0

    def step(self) -> dict[str, Any]:
        if self.config["step_s"]:
            time.sleep(self.config["step_s"])
        self.i += 1
        curve = self.config["curves"][self.config["index"]]
        return {"value": curve_value(curve, self.i), "index": self.config["index"]}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "state"), "w") as fh:
            fh.write(str(self.i))

    def load_checkpoint(self, checkpoint_dir: Any) -> None:
        with open(os.path.join(checkpoint_dir, "state")) as fh:
            self.i = int(fh.read())

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        self.i = 0
        return True


class TunePBTToyNoReset(tune.Trainable):
    """``PBTBenchmarkExample`` without ``reset_config`` (an exploit starts a new actor)."""

    def setup(self, config: dict[str, Any]) -> None:
        self.lr = config["lr"]
        self.accuracy = 0.0
        self._log("setup")

    def step(self) -> dict[str, Any]:
        if self.config.get("step_s"):
            time.sleep(self.config["step_s"])
        self.accuracy, metrics = pbt_toy_step(self.accuracy, self.lr)
        self._log("result", self.iteration + 1)
        return metrics

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "state.json"), "w") as fh:
            json.dump({"accuracy": self.accuracy, "lr": self.lr, "saved_by": self.trial_id}, fh)
        self._log("save")

    def load_checkpoint(self, checkpoint_dir: Any) -> None:
        with open(os.path.join(checkpoint_dir, "state.json")) as fh:
            state = json.load(fh)
        self.accuracy = state["accuracy"]
        self._log("load", source=state["saved_by"])

    def _log(self, event: str, iteration: int | None = None, source: str = "") -> None:
        it = self.iteration if iteration is None else iteration
        EventLog.write(self.config["log_dir"], self.trial_id, event, it, source)


class TunePBTToy(TunePBTToyNoReset):
    """``PBTBenchmarkExample`` with its ``reset_config`` (returns True)."""

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        self.lr = new_config["lr"]
        self.config = new_config
        self._log("reset")
        return True


def _init() -> None:
    ray.init(
        address="local",  # a private cluster, never one already running here
        num_cpus=NUM_CPUS,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.WARNING,
    )


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
