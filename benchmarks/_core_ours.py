"""The core workload under trialflow's orchestrator (run in a child process).

``TrivialTrainable`` is the class trainable (systems ``ours``, ``ours-quiet``,
``ours-buf``, ``ours-pack``); :func:`trivial` is the same workload as a function
trainable (system ``ours-fn``), which reports its own checkpoints.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from orchestrator import Orchestrator, Trainable, get_checkpoint, report

from ._core_common import NUM_CPUS, CpuSampler, RunSpec, summarize
from ._core_dashboard import watched


class TrivialTrainable(Trainable):
    """One step is one counter increment; a checkpoint is one tiny file."""

    def setup(self, config: dict[str, Any]) -> None:
        self.i = 0

    def step(self) -> dict[str, Any]:
        self.i += 1
        return {"x": self.i, "t": time.time()}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "state"), "w") as fh:
            fh.write(str(self.i))

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "state")) as fh:
            self.i = int(fh.read())


def trivial(config: dict[str, Any]) -> None:
    """``TrivialTrainable`` as a function: one report per step, stamped like the class's.

    Every ``checkpoint_every`` steps it writes the tiny state file into a fresh
    temporary directory and reports it as the checkpoint (what the class's
    ``save_checkpoint`` writes); it resumes from :func:`get_checkpoint` when there is
    one. The driver's stop criterion ends it at its ``steps``-th report.
    """
    steps, every = int(config["steps"]), int(config["checkpoint_every"])
    i = 0
    checkpoint = get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint, "state")) as fh:
            i = int(fh.read())
    while i < steps:
        i += 1
        if every and i % every == 0:
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "state"), "w") as fh:
                    fh.write(str(i))
                report({"x": i, "t": time.time()}, checkpoint=d)
        else:
            report({"x": i, "t": time.time()})


class CountingHook:
    """A trivial user hook: it counts results (``async def``, or sync with ``sync``)."""

    def __init__(self) -> None:
        self.results = 0

    async def on_trial_result(self, trial: Any, result: dict[str, Any]) -> None:
        self.results += 1


class CountingSyncHook:
    def __init__(self) -> None:
        self.results = 0

    def on_trial_result(self, trial: Any, result: dict[str, Any]) -> None:
        self.results += 1


HOOKS = {"async": CountingHook, "sync": CountingSyncHook}


async def run(spec: RunSpec) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-core-ours-") as tmp, watched(spec, tmp) as page:
        t0 = time.time()
        sampler = CpuSampler()
        hooks = [HOOKS[spec.result_hook]()] if spec.result_hook else []
        orch = Orchestrator(
            storage=tmp,
            name="bench",
            keep_checkpoints=spec.keep,
            num_cpus=NUM_CPUS,
            log_to_driver=False,
            result_buffer=spec.result_buffer,
            trials_per_worker=spec.trials_per_worker,
            hooks=hooks,
            **({"loggers": [], "progress": False} if spec.quiet else {}),
        )
        async with orch:
            t_ray = time.time()
            for _ in range(spec.trials):
                if spec.function:
                    # No checkpoint_every: a function reports its checkpoints itself.
                    orch.add_trial(
                        trivial,
                        config={"steps": spec.steps, "checkpoint_every": spec.checkpoint_every},
                        stop={"training_iteration": spec.steps},
                        resources={"cpu": spec.cpu},
                    )
                else:
                    orch.add_trial(
                        TrivialTrainable,
                        config={},
                        stop={"training_iteration": spec.steps},
                        checkpoint_every=spec.checkpoint_every,
                        resources={"cpu": spec.cpu},
                    )
            trials = await orch.run()
            t_end = time.time()
            cpu = sampler.stop()
            stats = orch.statistics()
            states = sorted({t.state.value for t in trials})
        t_exit = time.time()
        stamps = [[r["t"] for r in t.results] for t in trials]
        kept = min(len(t.checkpoints) for t in trials) if trials else None
        return summarize(
            spec,
            t0=t0,
            t_ray=t_ray,
            t_end=t_end,
            t_exit=t_exit,
            stamps=stamps,
            cpu=cpu,
            checkpoints_kept=kept,
            extra={
                "states": states,
                "loop_events": stats.loop.events,
                "hooked": sum(h.results for h in hooks) if hooks else None,
                "dashboard": page,
            },
        )
