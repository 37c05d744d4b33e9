"""The core workload under Ray Tune, same Ray (run in a child process).

Tune is used as its documentation shows: the class API, ``Tuner`` with ``RunConfig``
stop and ``CheckpointConfig``, fractional CPUs through ``tune.with_resources``, and its
default loggers and settings otherwise. With ``spec.function`` (system ``tune-fn``) the
trainable is Tune's function API instead: :func:`tune_trivial` calls ``tune.report``
once per step and passes a ``tune.Checkpoint`` every ``checkpoint_every`` steps.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import ray
from ray import tune

from ._core_common import NUM_CPUS, CpuSampler, RunSpec, summarize
from ._shared import init_private_ray


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


def tune_trivial(config: dict[str, Any]) -> None:
    """``TuneTrivial`` as a Tune function: one ``tune.report`` per step, stamped ``t``.

    Every ``checkpoint_every`` steps it writes the tiny state file into a temporary
    directory and reports it with ``tune.Checkpoint.from_directory``; it resumes from
    ``tune.get_checkpoint()`` when there is one. Tune's stop criterion ends it.
    """
    steps, every = int(config["steps"]), int(config["checkpoint_every"])
    i = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d, open(os.path.join(d, "state")) as fh:
            i = int(fh.read())
    while i < steps:
        i += 1
        if every and i % every == 0:
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "state"), "w") as fh:
                    fh.write(str(i))
                tune.report(
                    {"x": i, "t": time.time()}, checkpoint=tune.Checkpoint.from_directory(d)
                )
        else:
            tune.report({"x": i, "t": time.time()})


def run(spec: RunSpec) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-core-tune-") as tmp:
        t0 = time.time()
        sampler = CpuSampler()
        init_private_ray(NUM_CPUS)
        t_ray = time.time()
        if spec.function:
            # A function checkpoints when it reports one: Tune refuses checkpoint_frequency.
            trainable: Any = tune_trivial
            checkpoint_config = tune.CheckpointConfig(num_to_keep=spec.keep)
            param_space = {"steps": spec.steps, "checkpoint_every": spec.checkpoint_every}
        else:
            trainable = TuneTrivial
            checkpoint_config = tune.CheckpointConfig(
                checkpoint_frequency=spec.checkpoint_every, num_to_keep=spec.keep
            )
            param_space = None
        tuner = tune.Tuner(
            tune.with_resources(trainable, {"cpu": spec.cpu}),
            param_space=param_space,
            tune_config=tune.TuneConfig(num_samples=spec.trials),
            run_config=tune.RunConfig(
                name="bench",
                storage_path=tmp,
                stop={"training_iteration": spec.steps},
                checkpoint_config=checkpoint_config,
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
