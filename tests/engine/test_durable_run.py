"""What a crash can cost, on the fake Ray: a checkpoint persisted and a trial's end reach
the journal in storage promptly (``pace.DURABLE_WITHIN_S``), with nothing else to
prompt a write and the interval ten minutes away.

The waits are generous (a loaded machine is slow, not wrong): each passes only because
the event asked for the write, never by the interval's pace.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from orchestrator.core.journal_format import JOURNAL_KEY

from ..support.fake_engine import MakeOrchestrator
from ..support.fakeray import TRAIN, FakeRay
from ..support.journal_files import head_trials
from ..support.trainables import Counter

#: The journal interval: no regular write comes within the test.
INTERVAL = 600.0
#: How long the test waits for the journal: a tenth of the interval.
GENEROUS = 60.0


def journaled(head: Path, trial_id: str) -> dict[str, Any] | None:
    """The trial's part of the head in storage (None: not there yet)."""
    try:
        trials = head_trials(head.parent)
    except (OSError, ValueError, KeyError):
        return None  # not written yet, or being replaced
    return next((t for t in trials if t["id"] == trial_id), None)


async def wait_journaled(head: Path, trial_id: str, state: str, checkpoint: int) -> None:
    """Until the head in storage lists the trial in ``state`` with ``checkpoint`` as its
    newest checkpoint."""
    deadline = time.monotonic() + GENEROUS
    while True:
        trial = journaled(head, trial_id)
        if trial is not None and trial["checkpoints"]:
            newest = trial["checkpoints"][-1]["iteration"]
            if trial["state"] == state and newest == checkpoint:
                return
        if time.monotonic() > deadline:
            held = trial and (trial["state"], [c["iteration"] for c in trial["checkpoints"]])
            raise AssertionError(f"the journal holds {held}, not ({state!r}, [..., {checkpoint}])")
        await asyncio.sleep(0.05)


async def test_a_checkpoint_and_an_end_are_journaled_without_the_interval(
    tmp_path: Path, fake_ray: FakeRay, orchestrator: MakeOrchestrator
) -> None:
    """The trial's fourth step hangs while its checkpoint of iteration 3 is persisted:
    that checkpoint, then (the step released) its end with its final checkpoint, are in
    storage long before the next regular write."""
    orch = orchestrator(
        storage=tmp_path, name="exp", journal_interval=INTERVAL, progress=False, loggers=[]
    )
    head = tmp_path / "exp" / JOURNAL_KEY
    async with orch:
        trial = orch.add_trial(
            Counter, stop={"training_iteration": 6}, checkpoint_every=3, result_buffer=1
        )
        gate = fake_ray.hold(TRAIN, trial=trial.id, after=3)
        runner = asyncio.create_task(orch.run())
        try:
            await gate.reached()
            await wait_journaled(head, trial.id, "RUNNING", checkpoint=3)
            gate.open()
            await wait_journaled(head, trial.id, "TERMINATED", checkpoint=6)
        finally:
            gate.open()
            await asyncio.wait_for(runner, GENEROUS)
    assert [r["training_iteration"] for r in trial.results] == [1, 2, 3, 4, 5, 6]
