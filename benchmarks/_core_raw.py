"""The core workload as a bare asyncio loop over raw actor calls (run in a child process).

The floor the orchestrator is measured against: one plain actor per trial, one call per
step, one coroutine per trial awaiting ``actor.step.remote()``. Every
``checkpoint_every`` steps the coroutine also submits a save without awaiting it (the
actor runs calls in order, so it is pipelined like ours); the actor writes a tiny file
and keeps the newest ``keep``. No state machine, no storage layer, no bookkeeping.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from typing import Any

import ray

from ._core_common import NUM_CPUS, CpuSampler, RunSpec, summarize
from ._shared import init_private_ray


@ray.remote
class RawActor:
    def __init__(self, directory: str, keep: int) -> None:
        self.directory = directory
        self.keep = keep
        self.i = 0
        self.saved: list[str] = []

    def step(self) -> dict[str, Any]:
        self.i += 1
        return {"x": self.i, "t": time.time()}

    def save(self) -> str:
        path = os.path.join(self.directory, f"checkpoint_{self.i:06d}")
        os.makedirs(path)
        with open(os.path.join(path, "state"), "w") as fh:
            fh.write(str(self.i))
        self.saved.append(path)
        while len(self.saved) > self.keep:
            shutil.rmtree(self.saved.pop(0), ignore_errors=True)
        return path

    def kept(self) -> int:
        return len(self.saved)


async def _drive(actor: Any, spec: RunSpec, out: list[float]) -> int:
    saves = []
    every = spec.checkpoint_every
    for i in range(1, spec.steps + 1):
        result = await actor.step.remote()
        out.append(result["t"])
        if every and i % every == 0:
            saves.append(actor.save.remote())
    await asyncio.gather(*saves)
    kept: int = await actor.kept.remote()
    return kept


async def run(spec: RunSpec) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-core-raw-") as tmp:
        t0 = time.time()
        sampler = CpuSampler()
        init_private_ray(NUM_CPUS)
        t_ray = time.time()
        actors = []
        for n in range(spec.trials):
            directory = os.path.join(tmp, f"trial_{n:05d}")
            os.makedirs(directory)
            options = RawActor.options(num_cpus=spec.cpu)  # type: ignore[attr-defined]
            actors.append(options.remote(directory, spec.keep))
        stamps: list[list[float]] = [[] for _ in actors]
        kept = await asyncio.gather(
            *(_drive(a, spec, s) for a, s in zip(actors, stamps, strict=True))
        )
        t_end = time.time()
        cpu = sampler.stop()
        for actor in actors:
            ray.kill(actor)
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
            checkpoints_kept=min(kept) if kept else None,
        )
