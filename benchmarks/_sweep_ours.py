"""The sweep workloads under trialflow's ``Orchestrator.sweep`` (run in a child process)."""

from __future__ import annotations

import tempfile
import time
from typing import Any

from orchestrator import Orchestrator, Trainable
from orchestrator.search import uniform

from ._core_common import NUM_CPUS, CpuSampler
from ._sweep_common import rss_bytes
from ._sweep_figures import last_of, sweep_figures
from ._twin_steps import SleepySteps


class SleepyTrainable(SleepySteps, Trainable):
    """``_twin_steps.SleepySteps`` for ours."""


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-sweep-ours-") as tmp:
        t0 = time.time()
        orch = Orchestrator(storage=tmp, name="bench", num_cpus=NUM_CPUS, log_to_driver=False)
        async with orch:
            t_ray = time.time()
            rss0 = rss_bytes()
            sampler = CpuSampler()  # the driver's CPU from here: Ray's start-up left out
            result = await orch.sweep(
                SleepyTrainable,
                {"x": uniform(0, 1), "step_s": spec["step_s"]},
                num_samples=spec["trials"],
                metric="score",
                mode="max",
                max_concurrent_trials=spec["concurrency"],
                stop={"training_iteration": spec["steps"]},
                resources={"cpu": spec["cpu"]},
                seed=spec.get("seed"),
            )
            t_end = time.time()
            cpu = sampler.stop()
            rss1 = rss_bytes()
            trials = result.trials
            per_trial = [last_of(t.last_result) for t in trials]
            states = sorted({t.state.value for t in trials})
            errors = len(result.errors)
        t_exit = time.time()
    return sweep_figures(
        spec,
        t0=t0,
        t_ray=t_ray,
        t_end=t_end,
        t_exit=t_exit,
        per_trial=per_trial,
        cpu=cpu,
        rss=(rss0, rss1),
        errors=errors,
        extra={"states": states},
    )
