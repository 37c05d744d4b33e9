"""Types and waits of the engine's tests on the fake Ray: the ``orchestrator`` and
``runtime`` fixtures of ``tests/engine/conftest.py`` build what these name."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from orchestrator import Orchestrator, Trial
from orchestrator.engine.trial_runtime import TrialRuntime

MakeOrchestrator = Callable[..., Orchestrator]
MakeRuntime = Callable[..., TrialRuntime]


async def until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait for ``condition`` (generous: a loaded CI machine is slow, not wrong)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.005)


def iterations(trial: Trial) -> list[int]:
    return [r["training_iteration"] for r in trial.results]
