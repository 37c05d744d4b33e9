"""Journals written by old versions of the code load and resume today.

``old_journals/`` holds two experiments written by the code of two old commits (see
``old_journals/write.py``): their pickles and import paths name modules that have since
moved (``orchestrator.trainable``, ``orchestrator.stopping``, ``orchestrator.function``,
``orchestrator.demo_model``), which no module of today has: only the table of moved
paths (:mod:`orchestrator.core.moved`) leads a journal's reader to where they went.
Every trial was paused (on request) after its third result, with a checkpoint of it.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from orchestrator import Orchestrator, TrialState

OLD = Path(__file__).parent / "old_journals"

pytestmark = pytest.mark.usefixtures("ray_local")


@pytest.mark.parametrize(
    ("name", "ends"),
    [
        # The reshape into layers moved Trainable, StopCondition and the function API.
        ("before_layers", {"Counter": ("n", 4), "count": ("n", 4)}),
        # The demo's model was journaled by its import path, orchestrator.demo_model.
        ("before_cli", {"Counter": ("n", 4), "DigitsMLP": ("training_iteration", 50)}),
    ],
)
async def test_an_old_journal_loads_and_resumes_from_its_checkpoints(
    tmp_path: Path, name: str, ends: dict[str, tuple[str, int]]
) -> None:
    shutil.copytree(OLD / name, tmp_path / name)
    async with Orchestrator(storage=tmp_path, name=name, resume=True, progress=False) as orch:
        assert {t.state for t in orch.trials} == {TrialState.PAUSED}
        assert {t.iteration for t in orch.trials} == {3}
        # Paused on request, they stay paused until asked to resume, as any paused trial.
        running = asyncio.ensure_future(orch.run())
        await asyncio.wait_for(asyncio.gather(*(t.resume() for t in orch.trials)), 120)
        trials = await asyncio.wait_for(running, 120)
    assert sorted(t.id.rsplit("_", 2)[0] for t in trials) == sorted(ends)
    for trial in trials:
        metric, last = ends[trial.id.rsplit("_", 2)[0]]
        assert trial.state is TrialState.TERMINATED, trial.error
        assert trial.num_failures == 0
        # Continued from the checkpoint of iteration 3, not from scratch: one result
        # per iteration, in order, with the metric going on from where it was.
        iterations = [r["training_iteration"] for r in trial.results]
        assert iterations == list(range(1, len(iterations) + 1))
        assert trial.results[-1][metric] == last
        if metric == "n":
            assert [r["n"] for r in trial.results] == [1, 2, 3, 4]
