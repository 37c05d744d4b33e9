"""A trial whose step never returns: stop() and pause() end it after a grace period,
and no process of it outlives the experiment (real Ray)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from orchestrator import Orchestrator, Trial, TrialState

from .trainables import StuckStep

pytestmark = pytest.mark.usefixtures("ray_local")

CPU = {"cpu": 0.25}


async def until(condition: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def iterations(trial: Trial) -> list[int]:
    return [r["training_iteration"] for r in trial.results]


async def test_stop_and_pause_end_a_stuck_step_and_leave_no_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator.engine.loop")
    async with Orchestrator(storage=tmp_path, name="stuck", stop_grace_s=1.0) as orch:
        stopped, paused = (
            orch.add_trial(StuckStep, {"stuck_after": 3}, checkpoint_every=2, resources=CPU)
            for _ in range(2)
        )
        left = orch.add_trial(StuckStep, {"stuck_after": 3}, resources=CPU)  # stuck at exit
        trials = (stopped, paused, left)
        runner = asyncio.create_task(orch.run())
        await until(lambda: all(t.iteration == 3 and t.checkpoints for t in trials[:2]))
        await until(lambda: left.iteration == 3)
        pids = {t.id: t.results[-1]["pid"] for t in trials}
        await asyncio.wait_for(stopped.stop(), 60)
        await asyncio.wait_for(paused.pause(), 60)
        assert stopped.state is TrialState.TERMINATED and iterations(stopped) == [1, 2, 3]
        assert paused.state is TrialState.PAUSED and paused.actor is None
        assert paused.latest_checkpoint is not None and paused.latest_checkpoint.iteration == 2
        await until(lambda: not alive(pids[stopped.id]) and not alive(pids[paused.id]), 60)
        assert f"trial {stopped.id}: its actor did not answer within its grace" in caplog.text
        assert left.state is TrialState.RUNNING
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
    await until(lambda: not alive(pids[left.id]), 60)  # killed at exit
