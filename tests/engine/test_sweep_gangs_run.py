"""A sweep of trials that ask Ray for nothing (a Ray Train trial's function: Train
places its workers itself) on the fake Ray: the cluster's resources cannot bound it,
so it runs one trial at a time and says so once, naming the sweep and the way on;
with ``max_concurrent_trials`` it runs that many and says nothing.
(``tests/train/test_ray_train_sweep.py`` runs such a sweep of real Train runs.)"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from orchestrator import Orchestrator, TrialState
from orchestrator.search import grid

from ..support.fake_engine import MakeOrchestrator
from .trainables import FakeObjective

NOTHING = {"cpu": 0}


async def most_running(orch: Orchestrator, done: asyncio.Event) -> int:
    most = 0
    while not done.is_set():
        most = max(most, sum(t.state is TrialState.RUNNING for t in orch.trials))
        await asyncio.sleep(0.005)
    return most


async def run(orch: Orchestrator, marks: Path, **options: object) -> tuple[list, int]:
    done = asyncio.Event()
    watch = asyncio.ensure_future(most_running(orch, done))
    try:
        result = await orch.sweep(
            FakeObjective,
            {"x": grid([0.1, 0.2, 0.3]), "y": 0.0, "marks": str(marks)},
            stop={"training_iteration": 3},
            resources=NOTHING,
            **options,  # type: ignore[arg-type]
        )
    finally:
        done.set()
    return result.trials, await watch


async def test_a_sweep_of_trials_asking_for_nothing_runs_one_at_a_time_and_says_so(
    tmp_path: Path, orchestrator: MakeOrchestrator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator")
    async with orchestrator(storage=tmp_path, name="gangs") as orch:
        trials, most = await run(orch, tmp_path)
    assert all(t.state is TrialState.TERMINATED for t in trials)
    assert most <= 1
    said = [r.getMessage() for r in caplog.records if "Ray for no resources" in r.getMessage()]
    assert len(said) == 1, said  # once, however often the bound is read
    assert "sweep 'sweep'" in said[0] and "max_concurrent_trials" in said[0]


async def test_max_concurrent_trials_bounds_a_sweep_of_trials_asking_for_nothing(
    tmp_path: Path, orchestrator: MakeOrchestrator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator")
    async with orchestrator(storage=tmp_path, name="gangs") as orch:
        trials, most = await run(orch, tmp_path, max_concurrent_trials=2)
    assert all(t.state is TrialState.TERMINATED for t in trials)
    assert most <= 2
    assert "Ray for no resources" not in caplog.text
