"""``bench_function_ckpt`` under trialflow's orchestrator (run in a child process).

The function trainable :func:`train` runs the shared epoch loop with
``orchestrator.report``; storage is the S3 emulator, configured as in
``bench_restore``: ``storage="s3://bucket/prefix"``, ``storage_options`` with the
endpoint, and the credentials in the workers' ``runtime_env``. The orchestrator is
otherwise as shipped (its default loggers, progress display and result buffering).
"""

from __future__ import annotations

import os
import time
from typing import Any

from orchestrator import Orchestrator, report

from ._core_common import CpuSampler
from ._function_ckpt_common import NUM_CPUS, epoch_loop, summarize
from ._restore_common import AWS_ENV, BUCKET


def _send(metrics: dict[str, Any], checkpoint: str | None) -> None:
    if checkpoint is None:
        report(metrics)
    else:
        report(metrics, checkpoint=checkpoint)


def train(config: dict[str, Any]) -> None:
    """The shared epoch loop, reporting through ``orchestrator.report``."""
    epoch_loop(config, _send)


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    os.environ.update(AWS_ENV)
    t0 = time.time()
    sampler = CpuSampler(interval=1.0)
    orch = Orchestrator(
        storage=f"s3://{BUCKET}/{spec['prefix']}",
        storage_options={"endpoint_url": spec["endpoint"]},
        runtime_env={"env_vars": dict(AWS_ENV)},
        name="fnckpt",
        keep_checkpoints=spec["keep"],
        num_cpus=NUM_CPUS,
        log_to_driver=False,
    )
    async with orch:
        t_ray = time.time()
        trial = orch.add_trial(
            train,
            config={k: spec[k] for k in ("epochs", "size", "iterations", "checkpoint")},
            stop={"training_iteration": spec["epochs"]},
            resources={"cpu": 1},
        )
        await orch.run()
        t_end = time.time()
        cpu = sampler.stop()
        results = [dict(r) for r in trial.results]
        kept = len(trial.checkpoints)
        state = trial.state.value
        error = None if trial.error is None else repr(trial.error)
    figures = summarize(
        spec,
        results,
        t0=t0,
        t_ray=t_ray,
        t_end=t_end,
        checkpoints_kept=kept,
        extra={"state": state, "error": error, "cpu_s": cpu},
    )
    figures["ok"] = figures["ok"] and state == "TERMINATED"
    return figures
