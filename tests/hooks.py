"""Helpers the real-Ray tests (``tests/``) and the fake-Ray ones (``tests/engine/``)
share: a hook that records what happened to each trial, and a wait for a condition the
run reaches in its own time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from orchestrator import Trial


async def wait_for(predicate: Callable[[], Any], timeout: float = 60, every: float = 0.05) -> None:
    """Poll ``predicate`` every ``every`` seconds until it is true (``TimeoutError``
    after ``timeout``: generous, a loaded machine is slow, not wrong)."""

    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(every)

    await asyncio.wait_for(poll(), timeout)


class Timeline:
    """Each trial's hook events in order: its checkpoints, failures and restores."""

    def __init__(self) -> None:
        self.events: dict[str, list[tuple[str, int]]] = {}

    def _add(self, trial: Trial, kind: str, iteration: int) -> None:
        self.events.setdefault(trial.id, []).append((kind, iteration))

    def on_checkpoint(self, trial: Trial, checkpoint: Any) -> None:
        self._add(trial, "checkpoint", checkpoint.iteration)

    def on_trial_error(self, trial: Trial, error: BaseException) -> None:
        self._add(trial, "error", -1)

    def on_trial_restore(self, trial: Trial, checkpoint: Any) -> None:
        self._add(trial, "restore", checkpoint.iteration)

    def restored_from_newest(self, trial_id: str) -> bool:
        """Whether every restore loaded the newest checkpoint persisted before it."""
        newest, ok = 0, True
        for kind, iteration in self.events.get(trial_id, []):
            if kind == "checkpoint":
                newest = max(newest, iteration)
            elif kind == "restore":
                ok = ok and iteration == newest
        return ok
