"""Warm spares: a started actor waits for the next restart, is used by it and replaced,
and never takes resources a trial is waiting for."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, TrialState

from .conftest import HEAD_CPUS
from .trainables import Recorder, assert_failure_free_history, kill_worker

pytestmark = pytest.mark.usefixtures("ray_local")


async def wait_for(predicate: Any, timeout: float = 60) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), timeout)


async def test_a_restart_goes_to_the_spare_which_is_then_replaced(tmp_path: Path) -> None:
    async with Orchestrator(storage=tmp_path, name="spare", max_failures=2, progress=False) as orch:
        trial = orch.add_trial(
            Recorder,
            {"delay": 0.02},
            stop={"training_iteration": 150},
            checkpoint_every=5,
            resources={"cpu": 0.25},
        )
        runner = asyncio.create_task(orch.run())
        spares = orch._dispatcher.executor.spares  # type: ignore[union-attr]
        hosts = orch._dispatcher.executor.hosts  # type: ignore[union-attr]
        await wait_for(lambda: spares.started == 1 and trial.checkpoints)
        (spare,) = hosts.spares()
        assert trial.last_result is not None
        kill_worker(trial.last_result["pid"])
        await wait_for(lambda: spares.used == 1)
        assert trial.actor is spare.actor  # the restart went to the warm actor
        await wait_for(lambda: spares.started == 2)  # and a new spare started
        await asyncio.wait_for(runner, 120)
        left = hosts.spares()
    assert trial.state is TrialState.TERMINATED and trial.num_failures == 1
    assert_failure_free_history(trial, 150)
    assert left == []  # retired once no trial could fail any more


async def test_no_spare_takes_resources_a_trial_needs(tmp_path: Path) -> None:
    async with Orchestrator(storage=tmp_path, name="full", max_failures=1, progress=False) as orch:
        trials = [
            orch.add_trial(
                Recorder, {"delay": 0.02}, stop={"training_iteration": 40}, resources={"cpu": 1}
            )
            for _ in range(HEAD_CPUS + 2)  # more than the head node holds at once
        ]
        await orch.run()
        spares = orch._dispatcher.executor.spares  # type: ignore[union-attr]
    assert all(t.state is TrialState.TERMINATED for t in trials)
    # While trials waited for CPUs, none went to a spare; once all ran, one may have.
    assert spares.started <= 1


async def test_no_spares_when_trials_may_not_fail(tmp_path: Path) -> None:
    async with Orchestrator(storage=tmp_path, name="nofail", progress=False) as orch:
        orch.add_trial(
            Recorder, {"delay": 0.01}, stop={"training_iteration": 50}, resources={"cpu": 0.25}
        )
        await orch.run()
        assert orch._dispatcher.executor.spares.started == 0  # type: ignore[union-attr]
