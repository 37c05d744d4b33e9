"""``bench_train`` under trialflow (run in a child process): ``Orchestrator.sweep`` of a
function trainable that drives a ``TorchTrainer`` with ``TrialReportCallback``, as the
README shows it. The trial's own actor asks for no CPU (``resources={"cpu": 0}``): the
gang holds the CPUs. The orchestrator is otherwise as shipped.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from typing import Any

from orchestrator import Orchestrator, Trial
from orchestrator.schedulers import ASHA
from orchestrator.search import grid

from ._core_common import NUM_CPUS
from ._train_common import (
    LEARNING_RATES,
    Clock,
    figures,
    fit,
    space_constants,
    stamp_figures,
)
from ._train_stamps import CpuByProcess


def distributed_trial(config: dict[str, Any]) -> None:
    """The trial: it only drives Train."""
    from orchestrator.integrations.ray_train import TrialReportCallback

    fit(config, TrialReportCallback())


class ClockHook:
    """Stamps each trial's start and each result's arrival on the driver's loop."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    async def on_trial_start(self, trial: Trial) -> None:
        self.clock.start(trial.id)

    async def on_trial_result(self, trial: Trial, result: Mapping[str, Any]) -> None:
        self.clock.result(trial.id, result)


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    clock = Clock()
    with tempfile.TemporaryDirectory(prefix="bench-train-ours-") as tmp:
        t0 = time.time()
        orch = Orchestrator(
            storage=f"{tmp}/runs",
            name="bench",
            hooks=[ClockHook(clock)],
            num_cpus=NUM_CPUS,
            log_to_driver=False,
        )
        async with orch:
            t_ray = time.time()
            sampler = CpuByProcess() if spec.get("profile") else None
            scheduler = (
                ASHA(max_t=spec["epochs"], grace_period=1, reduction_factor=2)
                if spec["scheduler"] == "asha"
                else None
            )
            result = await orch.sweep(
                distributed_trial,
                {
                    "lr": grid(list(LEARNING_RATES[: spec["trials"]])),
                    **space_constants(spec, f"{tmp}/train"),
                },
                metric="loss",
                mode="min",
                scheduler=scheduler,
                max_concurrent_trials=spec["concurrency"],
                resources={"cpu": 0},
            )
            t_end = time.time()
            cpu = sampler.stop() if sampler is not None else None
            errors = len(result.errors)
            checkpoints = sum(len(t.checkpoints) for t in result.trials)
            states = sorted({t.state.value for t in result.trials})
        stamps = stamp_figures(spec, f"{tmp}/train")
    return figures(
        spec,
        clock,
        t0=t0,
        t_ray=t_ray,
        t_end=t_end,
        errors=errors,
        checkpoints=checkpoints,
        extra={"states": states, "cpu_s": cpu, **stamps},
    )
