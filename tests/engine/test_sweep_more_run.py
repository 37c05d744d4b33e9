"""``Orchestrator.end_sweep``: a sweep ended from a hook asks for no more trials, stops the
ones running (TERMINATED, results kept) and returns; a resumed experiment does not
continue it. On the fake Ray (moved from ``tests/test_sweep_more.py``: only the Ray
under them changed)."""

from __future__ import annotations

import asyncio
import time
import types
from pathlib import Path
from typing import Any

import pytest

from orchestrator import ConfigError, Orchestrator, TrialState
from orchestrator.search import grid, uniform

from ..support.fake_engine import MakeOrchestrator
from ..support.trainables import counting


async def test_a_sweep_ended_from_a_hook_stops_its_trials_and_starts_no_more(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    class EndAtThree:
        def __init__(self) -> None:
            self.orch: Orchestrator | None = None

        def on_trial_result(self, trial: Any, result: dict[str, Any]) -> None:
            if result["count"] >= 3 and self.orch is not None:
                self.orch.end_sweep("s")  # a sync hook: it runs in a thread

    def sweep(orch: Orchestrator) -> Any:
        """The script's sweep, called the same way in the run and in the resumed one."""
        return orch.sweep(
            counting,
            {"x": uniform(0, 1), "delay": 0.05},
            num_samples=20,
            max_concurrent_trials=2,
            resources={"cpu": 0.25},
            name="s",
        )

    hook = EndAtThree()
    async with orchestrator(storage=tmp_path, name="ended", hooks=[hook], progress=False) as orch:
        hook.orch = orch
        result = await sweep(orch)
        assert orch.trials and all(t.state is TrialState.TERMINATED for t in orch.trials)
    assert 1 <= len(result.trials) < 20
    assert all(t.last_result is not None for t in result.trials[:1])
    assert max(t.iteration for t in result.trials) < 1000

    async with orchestrator(storage=tmp_path, name="ended", resume=True, progress=False) as orch:
        again = await sweep(orch)
    assert [t.id for t in again.trials] == [t.id for t in result.trials]


def reports_a(config: dict[str, Any]) -> None:
    from orchestrator import report

    while True:
        time.sleep(0.05)
        report({"which": "a"})


def reports_b(config: dict[str, Any]) -> None:
    from orchestrator import report

    for _ in range(3):
        report({"which": "b"})


async def test_a_resumed_sweeps_unfinished_trials_run_the_resuming_calls_trainable(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    args: dict[str, Any] = {"num_samples": 2, "max_concurrent_trials": 2, "name": "s"}
    args["resources"] = {"cpu": 0.25}
    async with orchestrator(storage=tmp_path, name="re", progress=False) as orch:
        task = asyncio.create_task(orch.sweep(reports_a, {"x": uniform(0, 1)}, **args))
        while len(orch.trials) < 2 or not all(t.last_result for t in orch.trials):
            await asyncio.sleep(0.1)
        task.cancel()  # the driver goes away mid-sweep, its trials running
        with pytest.raises(asyncio.CancelledError):
            await task
    # The script's reports_a, its code edited between the two runs (as Tune's
    # Tuner.restore(path, trainable) allows): the same trainable by name, new code.
    edited = types.FunctionType(reports_b.__code__, reports_b.__globals__, "reports_a")
    edited.__qualname__ = "reports_a"
    async with orchestrator(storage=tmp_path, name="re", resume=True, progress=False) as orch:
        result = await orch.sweep(edited, {"x": uniform(0, 1)}, **args)
    assert len(result.trials) == 2
    assert all(t.last_result and t.last_result["which"] == "b" for t in result.trials)


async def test_resources_may_be_a_function_of_each_trials_config(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="shapes", progress=False) as orch:
        result = await orch.sweep(
            reports_b,
            {"cpus": grid([0.25, 0.5])},
            resources=lambda config: {"cpu": config["cpus"]},
        )
        with pytest.raises(ConfigError, match="resources function raised KeyError"):
            await orch.sweep(reports_b, {"x": 1}, resources=lambda c: {"cpu": c["nope"]}, name="t")
    assert sorted(t.resources["cpu"] for t in result.trials) == [0.25, 0.5]
    assert all(t.resources["cpu"] == t.config["cpus"] for t in result.trials)
