"""The journal's durability bound (``pace.DURABLE_WITHIN_S``): a checkpoint persisted
(``Journal.soon``) is written promptly even when the pace of plain writes is minutes,
as after a slow write to storage, and checkpoints persisted together share one write.
Each wait is generous and passes only because the request asked for the write."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

import orchestrator.journal.pace as journal_module
from orchestrator.core.journal_format import JOURNAL_KEY
from orchestrator.journal.writer import Journal
from storage import open_storage

from ..support.slow_storage import CountedWrites, SlowWrites

#: How long a test waits for a write that a request asked for; the pace it must beat is
#: at least three times this.
GENEROUS = 10.0


async def _heads_at_least(started: list[float], count: int) -> None:
    deadline = time.monotonic() + GENEROUS
    while len(started) < count:
        assert time.monotonic() < deadline, f"only {len(started)} write(s) of {count}"
        await asyncio.sleep(0.01)


async def test_a_checkpoint_cuts_short_the_pause_after_a_slow_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Storage took 0.3 s to take a write: the plain pace is now 30 s (STORAGE_SHARE
    0.01), but a checkpoint persisted is in storage within the bound."""
    monkeypatch.setattr(journal_module, "STORAGE_SHARE", 0.01)
    mark = {"mark": 0}
    async with open_storage(tmp_path) as store:
        slow = SlowWrites(store, delay=0.3)
        journal = Journal(slow, name="exp", interval=0.01)
        journal.set_extras(lambda: dict(mark))
        journal.start()
        try:
            journal.touch()
            await _heads_at_least(slow.started, 1)
            mark["mark"] = 1
            journal.touch()  # a plain result: waits for the pace
            await asyncio.sleep(0.5)
            assert len(slow.started) == 1
            mark["mark"] = 2
            journal.soon()  # a checkpoint persisted
            await _heads_at_least(slow.started, 2)
            while json.loads(await store.read_bytes(JOURNAL_KEY))["mark"] != 2:
                assert time.monotonic() - slow.started[1] < GENEROUS
                await asyncio.sleep(0.01)
        finally:
            await journal.aclose()


async def test_checkpoints_persisted_together_share_a_write(tmp_path: Path) -> None:
    async with open_storage(tmp_path) as store:
        counted = CountedWrites(store)
        journal = Journal(counted, name="exp", interval=60.0)
        journal.start()
        try:
            journal.touch()
            await _heads_at_least(counted.heads, 1)
            for _ in range(200):  # two hundred trials' checkpoints in the same moment
                journal.soon()
            await _heads_at_least(counted.heads, 2)
            await asyncio.sleep(0.5)
            assert len(counted.heads) == 2
        finally:
            await journal.aclose()
