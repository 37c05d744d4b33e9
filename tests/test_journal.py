"""The journal's writer: its writes never take more than a small share of the time."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

import orchestrator.journal as journal_module
from orchestrator.journal import JOURNAL_KEY, Journal
from storage import Storage, StorageError, open_storage


class SlowWrites:
    """The journal's view of a storage whose writes take ``delay`` seconds (a large
    journal on a slow bucket), writing through to a real one."""

    def __init__(self, store: Storage, delay: float) -> None:
        self.store = store
        self.delay = delay
        self.started: list[float] = []

    async def write_bytes(self, key: str, data: bytes) -> None:
        self.started.append(time.monotonic())
        await asyncio.sleep(self.delay)
        await self.store.write_bytes(key, data)


async def _gaps_between_writes(store: Storage, *, delay: float, seconds: float) -> list[float]:
    """Run a journal that always has something new to write for ``seconds``, through a
    storage whose writes take ``delay``; the gaps between its writer's writes (the last
    write is aclose()'s own, not the writer's)."""
    timed = SlowWrites(store, delay=delay)
    journal = Journal(timed, name="exp", interval=0.01)
    journal.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        journal.touch()
        await asyncio.sleep(0.02)
    await journal.aclose()
    by_writer = timed.started[:-1]
    gaps = [b - a for a, b in zip(by_writer[:-1], by_writer[1:], strict=True)]
    assert len(gaps) >= 2, timed.started
    return gaps


async def test_writes_space_out_as_storage_gets_slower(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_module, "STORAGE_SHARE", 0.5)
    async with open_storage(tmp_path) as store:
        gaps = await _gaps_between_writes(store, delay=0.2, seconds=2.5)
        doc = json.loads(await store.read_bytes(JOURNAL_KEY))
    assert doc["name"] == "exp" and doc["trials"] == []
    # Each write took >= 0.2 s, so the next may start only 0.2 / 0.5 = 0.4 s after it.
    assert min(gaps) >= 0.55, gaps


async def test_writes_space_out_as_the_document_costs_more_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building the document is O(results) of driver CPU: the pause grows with that CPU
    time, not with the wall time a loaded machine or a slow fsync adds."""
    build = journal_module._assemble

    def costly(*parts: object) -> bytes:
        start = time.thread_time()
        while time.thread_time() - start < 0.1:  # 0.1 CPU-s, as a large journal costs
            pass
        return build(*parts)  # type: ignore[arg-type]

    monkeypatch.setattr(journal_module, "_assemble", costly)
    monkeypatch.setattr(journal_module, "WRITE_SHARE", 0.25)
    async with open_storage(tmp_path) as store:
        gaps = await _gaps_between_writes(store, delay=0.0, seconds=2.5)
    # >= 0.1 CPU-s per document / 0.25 = a pause of >= 0.4 s, plus the build itself.
    assert min(gaps) >= 0.45, gaps


async def test_a_slow_store_of_a_small_journal_does_not_stall_it_for_long(
    tmp_path: Path,
) -> None:
    """One slow write (an fsync stuck behind other I/O) of a cheap document delays the
    next by a few times that write, not by twenty times it."""
    async with open_storage(tmp_path) as store:
        gaps = await _gaps_between_writes(store, delay=0.3, seconds=3.5)
    # 0.3 s to store / STORAGE_SHARE (0.25) = 1.2 s, plus the write: never the 6 s that
    # spacing by wall time at WRITE_SHARE (0.05) gave.
    assert max(gaps) < 2.5, gaps


class FailingWrites:
    """A storage whose first ``failures`` journal writes fail, as in an outage."""

    def __init__(self, store: Storage, failures: int) -> None:
        self.store = store
        self.failures = failures

    async def write_bytes(self, key: str, data: bytes) -> None:
        if self.failures:
            self.failures -= 1
            raise StorageError("storage is down", uri="test://")
        await self.store.write_bytes(key, data)


async def test_after_next_write_waits_for_a_successful_write(tmp_path: Path) -> None:
    """Old checkpoints are deleted only once the journal names their successors: a
    failed write keeps the deletion waiting for the next one."""
    async with open_storage(tmp_path) as store:
        journal = Journal(FailingWrites(store, failures=1), name="exp", interval=0.01)
        ran: list[str] = []
        journal.after_next_write(lambda: ran.append("delete"))
        await journal.flush()  # fails
        assert ran == [] and journal.failed_writes == 1
        assert not await store.exists(JOURNAL_KEY)
        await journal.flush()
        assert ran == ["delete"] and journal.writes == 1
        await journal.flush()
        assert ran == ["delete"]  # once


async def test_a_cancelled_write_keeps_what_waits_for_it(tmp_path: Path) -> None:
    async with open_storage(tmp_path) as store:
        slow = SlowWrites(store, delay=5.0)
        journal = Journal(slow, name="exp", interval=0.01)
        ran: list[str] = []
        journal.after_next_write(lambda: ran.append("delete"))
        writing = asyncio.ensure_future(journal.flush())
        while not slow.started:
            await asyncio.sleep(0.01)
        writing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await writing
        assert ran == []
        slow.delay = 0.0
        await journal.flush()
        assert ran == ["delete"]
