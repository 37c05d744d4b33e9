"""The scheduler workloads under trialflow's ``Orchestrator.sweep`` (run in a child process)."""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from orchestrator import Orchestrator, Trainable
from orchestrator.schedulers import ASHA, PBT
from orchestrator.search import grid, uniform

from ._core_common import NUM_CPUS
from ._sched_common import GRACE, MAX_T, RF
from ._sched_figures import asha_figures, pbt_figures
from ._twin_steps import CurveSteps, PBTToyResetSteps, PBTToySteps


class CurveTrainable(CurveSteps, Trainable):
    """Follows the learning curve ``config["curves"][config["index"]]``."""


class PBTToyNoReset(PBTToySteps, Trainable):
    """``PBTBenchmarkExample`` for ours, without ``reset_config``."""


class PBTToy(PBTToyResetSteps, Trainable):
    """``PBTBenchmarkExample`` for ours, with its ``reset_config``."""


async def run_asha(spec: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-sched-ours-") as tmp:
        t0 = time.time()
        orch = Orchestrator(storage=tmp, name="asha", num_cpus=NUM_CPUS, log_to_driver=False)
        async with orch:
            t_ray = time.time()
            curves = spec["curves"]
            result = await orch.sweep(
                CurveTrainable,
                {
                    "index": grid(list(range(len(curves)))),
                    "curves": curves,
                    "step_s": spec["step_s"],
                },
                metric="value",
                mode="max",
                scheduler=ASHA(max_t=MAX_T, grace_period=GRACE, reduction_factor=RF),
                max_concurrent_trials=spec["concurrency"],
                # A guard only: ASHA stops every trial at max_t.
                stop={"training_iteration": 10 * MAX_T},
                resources={"cpu": spec["cpu"]},
                seed=spec["seed"],
            )
            t_end = time.time()
            lasts = [t.last_result or {} for t in result.trials]
            best = result.get_best().config["index"]
            errors = len(result.errors)
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


async def run_pbt(spec: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-sched-ours-") as tmp:
        log_dir = os.path.join(tmp, "events")
        os.makedirs(log_dir)
        t0 = time.time()
        orch = Orchestrator(storage=tmp, name="pbt", num_cpus=NUM_CPUS, log_to_driver=False)
        async with orch:
            t_ray = time.time()
            pbt = PBT(
                perturbation_interval=spec["interval"],
                hyperparam_mutations={"lr": uniform(0.0001, 0.02), "some_other_factor": [1, 2]},
                seed=spec["seed"],
            )
            result = await orch.sweep(
                PBTToy if spec["reset"] else PBTToyNoReset,
                {
                    "lr": 0.0001,
                    "some_other_factor": 1,
                    "log_dir": log_dir,
                    "step_s": spec.get("step_s", 0.0),
                },
                num_samples=spec["trials"],
                metric="mean_accuracy",
                mode="max",
                scheduler=pbt,
                max_concurrent_trials=spec["concurrency"],
                stop={"training_iteration": spec["iterations"], "done": 1},
                checkpoint_every=spec["interval"],
                keep_checkpoints=1,
                resources={"cpu": spec["cpu"]},
                seed=spec["seed"],
                reuse_actors=spec["reset"],
            )
            t_end = time.time()
            lasts = [t.last_result or {} for t in result.trials]
            checkpoints = sum(len(t.checkpoints) for t in result.trials)
            errors = [repr(e) for e in result.errors]
        t_exit = time.time()
        return pbt_figures(
            spec,
            t0=t0,
            t_ray=t_ray,
            t_end=t_end,
            t_exit=t_exit,
            lasts=lasts,
            exploits=len(pbt.lineage),
            errors=errors,
            log_dir=log_dir,
            extra={"checkpoints_kept": checkpoints},
        )
