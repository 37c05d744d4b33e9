"""How the real-Ray tests (``tests/``) and the fake-Ray ones (``tests/engine/``) watch a
run: a wait for a condition it reaches in its own time, a hook that records what
happened to each trial, the checkpoints committed on disk and the files as they are,
JSON read as strictly as standard readers do, and what a node's loss must leave (the
same scenario runs on both)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from orchestrator import Trial, TrialState
from storage import MANIFEST_NAME

from .trainables import assert_failure_free_history


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


def committed(root: Path, trial: Trial) -> list[str]:
    """The names of ``trial``'s checkpoints committed (with a manifest) under the local
    storage ``root``, sorted."""
    folder = root / trial.id
    return sorted(p.name for p in folder.iterdir() if (p / MANIFEST_NAME).exists())


def busiest_node(trials: Sequence[Trial], nodes: Sequence[Any]) -> tuple[Any, Any, list[Trial]]:
    """Of two nodes (each with a ``node_id``): the one hosting the most trials (a
    node-loss test kills it), the other, and the trials on the first (at least one)."""
    by_node: dict[str, list[Trial]] = {}
    for trial in trials:
        assert trial.node_id is not None
        by_node.setdefault(trial.node_id, []).append(trial)
    doomed = max(nodes, key=lambda n: len(by_node.get(n.node_id, [])))
    survivor = next(n for n in nodes if n is not doomed)
    moved = by_node.get(doomed.node_id, [])
    assert moved
    return doomed, survivor, moved


def assert_moved_whole(
    trials: Sequence[Trial],
    moved: Sequence[Trial],
    survivor_id: str,
    timeline: Timeline,
    final: int,
) -> None:
    """After a node's loss: every trial finished on the surviving node with a failure-free
    history, and each moved trial restored its newest checkpoint (not from scratch)."""
    for trial in trials:
        assert trial.state is TrialState.TERMINATED, trial.error
        assert_failure_free_history(trial, final)
        assert trial.node_id == survivor_id
    for trial in moved:
        assert trial.num_failures >= 1
        restores = [i for kind, i in timeline.events[trial.id] if kind == "restore"]
        assert restores and min(restores) >= 5  # from a checkpoint, not from scratch
        assert timeline.restored_from_newest(trial.id), timeline.events[trial.id]


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (by its relative path) and its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def strict_loads(text: str | bytes) -> Any:
    """``json.loads`` that refuses NaN, Infinity and -Infinity, as standard JSON does."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"not standard JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


class OwnTasks:
    """The running asyncio tasks named ``name`` that the current test started. The loop
    is the session's: a task another test left running (it failed before closing its
    experiment) is not this test's. Call :meth:`reset` as the test starts."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._others: set[asyncio.Task[Any]] = set()

    def _named(self) -> set[asyncio.Task[Any]]:
        return {t for t in asyncio.all_tasks() if t.get_name() == self.name}

    def reset(self) -> None:
        self._others = self._named()

    def running(self) -> list[asyncio.Task[Any]]:
        return [t for t in self._named() if t not in self._others]
