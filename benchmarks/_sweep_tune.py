"""The sweep workloads under Ray Tune's ``Tuner``, same Ray (run in a child process).

Tune as its documentation shows it: the class API, ``Tuner`` with ``param_space``,
``TuneConfig(num_samples, max_concurrent_trials, reuse_actors=True)``, ``RunConfig``
stop, fractional CPUs through ``tune.with_resources``; its default searcher and loggers.
"""

from __future__ import annotations

import tempfile
import time
from typing import Any

import ray
from ray import tune

from ._core_common import NUM_CPUS, CpuSampler
from ._shared import init_private_ray
from ._sweep_common import rss_bytes
from ._sweep_figures import last_of, sweep_figures
from ._twin_steps import SleepySteps


class TuneSleepy(SleepySteps, tune.Trainable):
    """``_twin_steps.SleepySteps`` for Tune."""


def run(spec: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-sweep-tune-") as tmp:
        t0 = time.time()
        init_private_ray(NUM_CPUS)
        t_ray = time.time()
        rss0 = rss_bytes()
        sampler = CpuSampler()  # the driver's CPU from here: Ray's start-up left out
        tuner = tune.Tuner(
            tune.with_resources(TuneSleepy, {"cpu": spec["cpu"]}),
            param_space={"x": tune.uniform(0, 1), "step_s": spec["step_s"]},
            tune_config=tune.TuneConfig(
                num_samples=spec["trials"],
                max_concurrent_trials=spec["concurrency"],
                reuse_actors=True,
                metric="score",
                mode="max",
            ),
            run_config=tune.RunConfig(
                name="bench",
                storage_path=tmp,
                stop={"training_iteration": spec["steps"]},
                verbose=0,
            ),
        )
        grid = tuner.fit()
        t_end = time.time()
        cpu = sampler.stop()
        rss1 = rss_bytes()
        results = [grid[i] for i in range(len(grid))]
        per_trial = [last_of(r.metrics) for r in results]
        errors = sum(r.error is not None for r in results)
        ray.shutdown()
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
    )
