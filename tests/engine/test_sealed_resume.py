"""A journal whose finished trials are in sealed objects (format 3) resumes as any other:
every trial is adopted as it was, with its results, and the resumed driver's first
write (a new base, every trial a live part of its head) lets it delete the objects of
the driver before it."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from orchestrator import Orchestrator, TrialState
from orchestrator.core.journal_format import JOURNAL_KEY, SEALED_PREFIX
from orchestrator.search import choice

from ..support.fake_engine import MakeOrchestrator
from ..support.trainables import Counter

CPU = {"cpu": 0.25}
SWEEP = {
    "num_samples": 6,
    "metric": "score",
    "mode": "max",
    "max_concurrent_trials": 3,
    "stop": {"training_iteration": 3},
    "resources": CPU,
    "seed": 1,
    "name": "s",
}


async def _all_in_objects(orch: Orchestrator, head: Path) -> dict[str, object]:
    """Journal writes until the head lists no trial of its own: every one is sealed, in
    an object (the loop releases an ended trial's actor after it ends)."""
    journal = orch._exp.journal
    assert journal is not None
    deadline = time.monotonic() + 60
    while True:
        await journal.flush()
        doc: dict[str, object] = json.loads(head.read_text())
        if doc["trials"] == []:
            return doc
        assert time.monotonic() < deadline, "timed out waiting for the trials to be sealed"
        await asyncio.sleep(0.01)


async def test_sealed_trials_resume_as_they_were(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    experiment = tmp_path / "exp"
    async with orchestrator(storage=tmp_path, name="exp", progress=False) as orch:
        first = await orch.sweep(Counter, {"x": choice([1, 2, 3])}, **SWEEP)  # type: ignore[arg-type]
        head = await _all_in_objects(orch, experiment / JOURNAL_KEY)
    assert head["sealed"]
    old = sorted(p.name for p in (experiment / SEALED_PREFIX).glob("*"))
    configs = {t.id: t.config for t in first.trials}
    async with orchestrator(storage=tmp_path, name="exp", progress=False, resume=True) as orch:
        again = await orch.sweep(Counter, {"x": choice([1, 2, 3])}, **SWEEP)  # type: ignore[arg-type]
        assert [t.id for t in again.trials] == list(configs)
        for trial in again.trials:
            assert trial.state is TrialState.TERMINATED
            assert trial.config == configs[trial.id]
            assert [r["training_iteration"] for r in trial.results] == [1, 2, 3]
    now = sorted(p.name for p in (experiment / SEALED_PREFIX).glob("*"))
    assert not set(old) & set(now)  # the earlier driver's objects are gone
