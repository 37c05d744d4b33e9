"""The core workload under Ray Tune, same Ray (run in a child process).

Tune is used as its documentation shows: the class API, ``Tuner`` with ``RunConfig``
stop and ``CheckpointConfig``, fractional CPUs through ``tune.with_resources``, and its
default loggers and settings otherwise.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from typing import Any

import ray
from ray import tune

from ._core_common import NUM_CPUS, CpuSampler, RunSpec, summarize


class TuneTrivial(tune.Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.i = 0

    def step(self) -> dict[str, Any]:
        self.i += 1
        return {"x": self.i, "t": time.time()}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "state"), "w") as fh:
            fh.write(str(self.i))

    def load_checkpoint(self, checkpoint_dir: Any) -> None:
        with open(os.path.join(checkpoint_dir, "state")) as fh:
            self.i = int(fh.read())


def run(spec: RunSpec) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-core-tune-") as tmp:
        t0 = time.time()
        sampler = CpuSampler()
        ray.init(
            address="local",  # a private cluster, never one already running here
            num_cpus=NUM_CPUS,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
        t_ray = time.time()
        tuner = tune.Tuner(
            tune.with_resources(TuneTrivial, {"cpu": spec.cpu}),
            tune_config=tune.TuneConfig(num_samples=spec.trials),
            run_config=tune.RunConfig(
                name="bench",
                storage_path=tmp,
                stop={"training_iteration": spec.steps},
                checkpoint_config=tune.CheckpointConfig(
                    checkpoint_frequency=spec.checkpoint_every, num_to_keep=spec.keep
                ),
                verbose=0,
            ),
        )
        grid = tuner.fit()
        t_end = time.time()
        cpu = sampler.stop()
        # Tune records every result in each trial's progress file; read them back
        # after the clock has stopped.
        results = [grid[i] for i in range(len(grid))]
        frames = [r.metrics_dataframe for r in results]
        stamps = [list(f["t"]) if f is not None else [] for f in frames]
        kept = min(len(r.best_checkpoints or ()) for r in results) if results else None
        errors = sum(r.error is not None for r in results)
        ray.shutdown()
        t_exit = time.time()
        return summarize(
            spec,
            t0=t0,
            t_ray=t_ray,
            t_end=t_end,
            t_exit=t_exit,
            stamps=stamps,
            cpu=cpu,
            checkpoints_kept=kept,
            extra={"errors": errors},
        )
