"""``bench_function_ckpt`` under Ray Tune's function API, same Ray (a child process).

:func:`train` runs the shared epoch loop with ``ray.tune.report`` (a checkpoint as
``tune.Checkpoint.from_directory``); storage is the S3 emulator through
``RunConfig(storage_path="bucket/prefix", storage_filesystem=pyarrow S3FileSystem)``,
as in ``bench_restore``. ``CheckpointConfig(num_to_keep=...)``; Tune's defaults
otherwise.
"""

from __future__ import annotations

import time
from typing import Any

import ray
from ray import tune

from ._core_common import CpuSampler
from ._function_ckpt_common import NUM_CPUS, epoch_loop, summarize
from ._restore_common import BUCKET, s3_filesystem
from ._shared import init_private_ray

#: The metrics the loop reports (Tune adds its own beside them).
FIELDS = ("epoch", "t", "work_s", "work_cpu_s", "write_s", "prev_report_s")


def _send(metrics: dict[str, Any], checkpoint: str | None) -> None:
    if checkpoint is None:
        tune.report(metrics)
    else:
        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(checkpoint))


def train(config: dict[str, Any]) -> None:
    """The shared epoch loop, reporting through ``ray.tune.report``."""
    epoch_loop(config, _send)


def run(spec: dict[str, Any]) -> dict[str, Any]:
    t0 = time.time()
    sampler = CpuSampler(interval=1.0)
    init_private_ray(NUM_CPUS)
    t_ray = time.time()
    tuner = tune.Tuner(
        tune.with_resources(train, {"cpu": 1}),
        param_space={k: spec[k] for k in ("epochs", "size", "iterations", "checkpoint")},
        tune_config=tune.TuneConfig(num_samples=1),
        run_config=tune.RunConfig(
            name="fnckpt",
            storage_path=f"{BUCKET}/{spec['prefix']}",
            storage_filesystem=s3_filesystem(spec["endpoint"]),
            stop={"training_iteration": spec["epochs"]},
            checkpoint_config=tune.CheckpointConfig(num_to_keep=spec["keep"]),
            verbose=0,
        ),
    )
    grid = tuner.fit()
    t_end = time.time()
    cpu = sampler.stop()
    result = grid[0]
    frame = result.metrics_dataframe
    results = (
        [{k: row[k] for k in FIELDS} for _, row in frame.iterrows()] if frame is not None else []
    )
    kept = len(result.best_checkpoints or ())
    error = None if result.error is None else repr(result.error)
    ray.shutdown()
    figures = summarize(
        spec,
        results,
        t0=t0,
        t_ray=t_ray,
        t_end=t_end,
        checkpoints_kept=kept,
        extra={"error": error, "cpu_s": cpu},
    )
    figures["ok"] = figures["ok"] and error is None
    return figures
