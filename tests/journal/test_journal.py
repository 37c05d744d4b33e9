"""The journal's writer: its writes never take more than a small share of the time."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

import orchestrator.journal.pace as pace
import orchestrator.journal.write_bytes as write_bytes
import orchestrator.journal.writer as journal_module
from orchestrator import ConfigError, Orchestrator, Trial, TrialState
from orchestrator.core.journal_format import BACKUP_KEY, JOURNAL_KEY, SEGMENTS_PREFIX
from orchestrator.errors import JournalDamaged
from orchestrator.journal.reader import load as load_journal
from orchestrator.journal.writer import Journal
from storage import Storage, StorageError, open_storage

from ..support.slow_storage import CountedWrites, SlowWrites, StorageView
from ..support.trainables import Counter

#: The head and its backup: rewritten whole by every write.
HEADS = (JOURNAL_KEY, BACKUP_KEY)


async def _gaps_between_writes(store: Storage, *, delay: float, seconds: float) -> list[float]:
    """Run a journal that always has something new to write, through a storage whose
    writes take ``delay``, until its writer has written four times (or ``seconds`` x 4
    have passed, on a very loaded machine); the gaps between the writer's writes (the
    last write is aclose()'s own, not the writer's)."""
    timed = SlowWrites(store, delay=delay)
    journal = Journal(timed, name="exp", interval=0.01)
    journal.start()
    deadline = time.monotonic() + 4 * seconds
    while len(timed.started) < 4 and time.monotonic() < deadline:
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
    monkeypatch.setattr(pace, "STORAGE_SHARE", 0.5)
    async with open_storage(tmp_path) as store:
        gaps = await _gaps_between_writes(store, delay=0.2, seconds=2.5)
        doc = json.loads(await store.read_bytes(JOURNAL_KEY))
    assert doc["name"] == "exp" and doc["trials"] == []
    # Each write took >= 0.2 s, so the next may start only 0.2 / 0.5 = 0.4 s after it.
    assert min(gaps) >= 0.55, gaps


async def test_writes_space_out_as_the_document_costs_more_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building a write (a base holds every result) costs driver CPU: the pause grows
    with that CPU time, not with the wall time a loaded machine or a slow fsync adds."""
    build = write_bytes._head

    def costly(*parts: object) -> bytes:
        start = time.thread_time()
        while time.thread_time() - start < 0.1:  # 0.1 CPU-s, as a large journal costs
            pass
        return build(*parts)  # type: ignore[arg-type]

    monkeypatch.setattr(write_bytes, "_head", costly)
    monkeypatch.setattr(pace, "WRITE_SHARE", 0.25)
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
    # spacing by wall time at WRITE_SHARE (0.05) gave. The bound leaves room for a loaded
    # machine, where the store's own time (and so the pause) stretches.
    assert max(gaps) < 4.5, gaps


class FailingWrites(StorageView):
    """A storage whose first ``failures`` journal writes fail, as in an outage."""

    def __init__(self, store: Storage, failures: int) -> None:
        super().__init__(store)
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


# -- results in segments -----------------------------------------------------------------


def _trials(tmp_path: Path, *ids: str) -> dict[str, Trial]:
    """Trials with their journal specs, as ``add_trial`` builds them (no Ray needed)."""
    orch = Orchestrator(storage=tmp_path / "unused", name="exp")
    return {i: orch.add_trial(Counter, trial_id=i) for i in ids}


class Recorded(StorageView):
    """A storage that records the size of each object written, by key."""

    def __init__(self, store: Storage) -> None:
        super().__init__(store)
        self.written: list[tuple[str, int]] = []

    async def write_bytes(self, key: str, data: bytes) -> None:
        self.written.append((key, len(data)))
        await self.store.write_bytes(key, data)


async def _loaded_results(store: Storage) -> dict[str, list[int]]:
    loaded = await load_journal(store)
    assert loaded is not None
    return {t.id: [r["n"] for r in t.results] for t in loaded}


async def _written(store: Storage, trial: Trial, *results: dict[str, Any]) -> Journal:
    """A journal of ``trial`` with ``results`` recorded, after one write."""
    journal = Journal(store, name="exp", interval=0.01)
    journal.track(trial._rt)
    for result in results:
        journal.record_result(trial._rt, result)
    await journal.flush()
    return journal


async def test_results_survive_segments_rollbacks_and_new_bases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever mix of appends, rollbacks and compactions the writes saw, the journal
    reads back each trial's results exactly, and storage keeps only listed segments."""
    monkeypatch.setattr(journal_module, "COMPACT_AFTER", 3)
    trials = _trials(tmp_path, "a", "b")
    expected: dict[str, list[int]] = {"a": [], "b": []}
    async with open_storage(tmp_path / "store", create=True) as store:
        journal = Journal(store, name="exp", interval=0.01)
        for trial in trials.values():
            journal.track(trial._rt)
        n = 0
        for round_ in range(12):
            for trial_id, trial in trials.items():
                for _ in range(1 + round_ % 3):
                    n += 1
                    journal.record_result(trial._rt, {"n": n})
                    expected[trial_id].append(n)
            if round_ % 4 == 2:  # a rollback, as a restore to an older checkpoint makes
                keep = len(expected["a"]) // 2
                journal.truncate(trials["a"]._rt, keep)
                del expected["a"][keep:]
            await journal.flush()
            assert await _loaded_results(store) == expected, round_
            head = json.loads(await store.read_bytes(JOURNAL_KEY))
            assert 1 <= len(head["segments"]) <= 3
            assert await store.list(SEGMENTS_PREFIX) == sorted(head["segments"])


async def test_a_write_stores_what_changed_not_every_result(tmp_path: Path) -> None:
    trial = _trials(tmp_path, "a")["a"]
    async with open_storage(tmp_path / "store", create=True) as store:
        recorded = Recorded(store)
        journal = Journal(recorded, name="exp", interval=0.01)
        journal.track(trial._rt)
        for n in range(2000):
            journal.record_result(trial._rt, {"n": n, "loss": 1.0 / (n + 1)})
        await journal.flush()
        base = sum(size for key, size in recorded.written if key not in HEADS)
        recorded.written.clear()
        journal.record_result(trial._rt, {"n": 2000, "loss": 0.0})
        await journal.flush()
        segment = sum(size for key, size in recorded.written if key not in HEADS)
        assert base > 50_000 and segment < 200
        assert (await _loaded_results(store))["a"] == list(range(2001))


async def test_a_segment_whose_head_was_never_written_is_not_read(tmp_path: Path) -> None:
    """A driver that dies between a segment and the head that lists it leaves an
    unlisted object: the journal reads as before it, and the next base sweeps it."""
    trial = _trials(tmp_path, "a")["a"]
    async with open_storage(tmp_path / "store", create=True) as store:
        journal = await _written(store, trial, {"n": 1})

        class HeadFails(Recorded):
            async def write_bytes(self, key: str, data: bytes) -> None:
                if key == JOURNAL_KEY:
                    raise StorageError("storage is down", uri="test://")
                await super().write_bytes(key, data)

        journal._storage = HeadFails(store)
        journal.record_result(trial._rt, {"n": 2})
        await journal.flush()
        assert journal.failed_writes == 1
        assert len(await store.list(SEGMENTS_PREFIX)) == 2  # one of them unlisted
        assert (await _loaded_results(store))["a"] == [1]

        resumed = Journal(store, name="exp", interval=0.01)  # as after a driver restart
        trial._rt.results = [{"n": 1}]  # what the restarted driver read back
        resumed.track(trial._rt)
        resumed.record_result(trial._rt, {"n": 2})
        await resumed.flush()
        assert (await _loaded_results(store))["a"] == [1, 2]
        head = json.loads(await store.read_bytes(JOURNAL_KEY))
        assert await store.list(SEGMENTS_PREFIX) == head["segments"]  # the rest swept


async def test_a_journal_of_the_earlier_format_still_loads(tmp_path: Path) -> None:
    trial = _trials(tmp_path, "a")["a"]
    async with open_storage(tmp_path / "store", create=True) as store:
        await _written(store, trial)
        head = json.loads(await store.read_bytes(JOURNAL_KEY))
        head["format"] = 1
        del head["segments"]
        head["trials"][0]["results"] = [{"n": 1}, {"n": 2}]
        del head["trials"][0]["results_count"]
        await store.write_bytes(JOURNAL_KEY, json.dumps(head).encode())
        assert (await _loaded_results(store))["a"] == [1, 2]


async def test_a_missing_segment_is_a_clear_error(tmp_path: Path) -> None:
    trial = _trials(tmp_path, "a")["a"]
    async with open_storage(tmp_path / "store", create=True) as store:
        await _written(store, trial, {"n": 1})
        await store.delete(SEGMENTS_PREFIX)
        with pytest.raises(JournalDamaged) as caught:
            await load_journal(store)
    message = str(caught.value)
    assert f"{SEGMENTS_PREFIX}/" in message and "is missing (the head" in message
    assert f"python -m orchestrator repair --storage {tmp_path} --name store" in message


def test_a_trial_may_not_take_the_journals_names(tmp_path: Path) -> None:
    orch = Orchestrator(storage=tmp_path, name="exp")
    for name in (JOURNAL_KEY, SEGMENTS_PREFIX, BACKUP_KEY):
        with pytest.raises(ConfigError, match="the name of the experiment's journal"):
            orch.add_trial(Counter, trial_id=name)


# -- urgent writes -------------------------------------------------------------------------


async def _wait_writes(store: CountedWrites, count: int, timeout: float = 30.0) -> None:
    async def poll() -> None:
        while len(store.heads) < count:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)


async def test_an_urgent_write_does_not_wait_for_the_interval(tmp_path: Path) -> None:
    """A trial's end is journaled at once, though the next write is a minute away."""
    async with open_storage(tmp_path) as store:
        counted = CountedWrites(store)
        journal = Journal(counted, name="exp", interval=60.0)
        journal.start()
        journal.touch()
        await _wait_writes(counted, 1)
        journal.touch()
        await asyncio.sleep(0.3)
        assert len(counted.heads) == 1  # an ordinary change waits for the interval
        journal.urgent()
        await _wait_writes(counted, 2)  # well within the 60 s interval
        await journal.aclose()


async def test_urgent_writes_that_come_together_share_a_write(tmp_path: Path) -> None:
    async with open_storage(tmp_path) as store:
        counted = CountedWrites(store)
        journal = Journal(counted, name="exp", interval=60.0)
        journal.start()
        journal.touch()
        await _wait_writes(counted, 1)
        for _ in range(200):  # two hundred trials ending in the same moment
            journal.urgent()
        await _wait_writes(counted, 2)
        await asyncio.sleep(0.5)
        assert len(counted.heads) == 2
        await journal.aclose()


async def test_closing_while_an_urgent_write_is_asked_for_returns(tmp_path: Path) -> None:
    """aclose() cancels the writer; an urgent request landing as it does must not
    swallow the cancellation (asyncio.wait_for could, before Python 3.12)."""
    async with open_storage(tmp_path) as store:
        for _ in range(20):
            journal = Journal(store, name="exp", interval=60.0)
            journal.start()
            await asyncio.sleep(0.02)
            journal.urgent()
            await asyncio.wait_for(journal.aclose(), 60)


async def test_a_write_serialises_the_trials_that_changed_not_every_settled_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36: a write re-serialised every trial's part of the head, so its cost grew
    with every trial the experiment ever had. A settled trial's part is now built again
    only when something in it changed, and then it is written as it is now."""
    trials = _trials(tmp_path, "a", "b", "c")
    async with open_storage(tmp_path / "store", create=True) as store:
        journal = Journal(store, name="exp", interval=0.01)
        for trial in trials.values():
            journal.track(trial._rt)
        for trial_id in ("b", "c"):
            trials[trial_id]._rt.machine._state = TrialState.TERMINATED
        await journal.flush()
        first = {t["id"]: t for t in json.loads(await store.read_bytes(JOURNAL_KEY))["trials"]}
        real = journal_module.dumps
        built: list[str] = []

        def counting(value: Any) -> str:
            if isinstance(value, dict) and "id" in value:
                built.append(value["id"])
            return real(value)

        monkeypatch.setattr(journal_module, "dumps", counting)
        await journal.flush()
        assert built == ["a"]  # b and c are settled and unchanged
        trials["b"]._rt.machine.num_failures = 1
        trials["c"]._rt.last_result = {"n": 1}
        for trial_id in ("b", "c"):  # as the loop says of a trial it handled an event for
            journal.changed(trials[trial_id]._rt)
        built.clear()
        await journal.flush()
        assert built == ["a", "b", "c"]
        now = {t["id"]: t for t in json.loads(await store.read_bytes(JOURNAL_KEY))["trials"]}
        assert now["b"] == {**first["b"], "num_failures": 1}
        assert now["c"] == {**first["c"], "last_result": {"n": 1}}
        built.clear()
        await journal.flush()
        assert built == ["a"]
        loaded = await load_journal(store)
        assert loaded is not None and sorted(t.id for t in loaded) == ["a", "b", "c"]


async def test_a_write_looks_only_at_the_trials_the_loop_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36: each write compared every settled trial's record with its kept part of
    the head (some 12 us a trial on the loop: 80 ms a write at ten thousand trials). A
    write now looks only at the trials not settled and those the loop handled an event
    for, or that have new results, since the last write."""
    ids = [f"t{i}" for i in range(6)]
    trials = _trials(tmp_path, *ids)
    async with open_storage(tmp_path / "store", create=True) as store:
        journal = Journal(store, name="exp", interval=0.01)
        for trial in trials.values():
            journal.track(trial._rt)
        for trial_id in ids[1:]:
            trials[trial_id]._rt.machine._state = TrialState.TERMINATED
        await journal.flush()
        looked: list[str] = []
        real = Journal._trial_head

        def counting(self: Journal, trial_id: str, trial: Any, count: int) -> str:
            looked.append(trial_id)
            return real(self, trial_id, trial, count)

        monkeypatch.setattr(Journal, "_trial_head", counting)
        await journal.flush()
        assert looked == ["t0"]  # the one not settled
        journal.changed(trials["t3"]._rt)
        journal.record_result(trials["t5"]._rt, {"n": 1})
        looked.clear()
        await journal.flush()
        assert looked == ["t0", "t3", "t5"]
        looked.clear()
        await journal.flush()
        assert looked == ["t0"]
        loaded = await load_journal(store)
        assert loaded is not None and [t.id for t in loaded] == ids
        assert [r["n"] for r in next(t for t in loaded if t.id == "t5").results] == [1]


async def test_a_finished_trials_results_leave_memory_once_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36: once a write stored every result of a trial that ended, the journal
    keeps only their place in its spill file, and the trial's record a view that reads
    them back; new bases still hold them, and a trial that comes back gets its rows back
    in memory before anything changes them. Nothing leaves memory before it is stored."""
    monkeypatch.setattr(journal_module, "COMPACT_AFTER", 2)
    trials = _trials(tmp_path, "a", "b")
    a, b = trials["a"]._rt, trials["b"]._rt
    async with open_storage(tmp_path / "store", create=True) as store:
        failing = RefusingWrites(store)
        journal = Journal(failing, name="exp", interval=0.01)
        for rt in (a, b):
            journal.track(rt)
        for n in range(3):
            for rt in (a, b):
                result = {"n": n, "loss": float("nan") if n == 1 else 0.5}
                rt.results.append(result)
                journal.record_result(rt, result)
        a.machine._state = TrialState.TERMINATED
        journal.changed(a)
        failing.fail = True  # not stored: stays in memory
        await journal.flush()
        assert isinstance(a.results, list) and isinstance(journal._results["a"], list)
        failing.fail = False
        await journal.flush()
        assert not isinstance(a.results, list) and isinstance(b.results, list)
        got = trials["a"].results
        assert [r["n"] for r in got] == [0, 1, 2] and got[1]["loss"] != got[1]["loss"]
        for _ in range(3):  # new bases read the spilled rows back
            result = {"n": 9}
            b.results.append(result)
            journal.record_result(b, result)
            await journal.flush()
            assert (await _loaded_results(store))["a"] == [0, 1, 2]
        # The trial comes back: a rollback and a new result, on its rows in memory again.
        journal.truncate(a, 1)
        journal.record_result(a, {"n": 5})
        await journal.flush()
        assert (await _loaded_results(store))["a"] == [0, 5]


class RefusingWrites(StorageView):
    """Writes fail while ``fail`` is set."""

    def __init__(self, store: Storage) -> None:
        super().__init__(store)
        self.fail = False

    async def write_bytes(self, key: str, data: bytes) -> None:
        if self.fail:
            raise StorageError(f"{key}: refused (test)")
        await self.store.write_bytes(key, data)


class HeldHeads(StorageView):
    """Holds each head's write until ``release`` is set, counting those under way."""

    def __init__(self, store: Storage) -> None:
        super().__init__(store)
        self.release = asyncio.Event()
        self.under_way = self.most = 0

    async def write_bytes(self, key: str, data: bytes) -> None:
        if key != JOURNAL_KEY:
            await self.store.write_bytes(key, data)
            return
        self.under_way += 1
        self.most = max(self.most, self.under_way)
        try:
            await self.release.wait()
            await self.store.write_bytes(key, data)
        finally:
            self.under_way -= 1


async def test_a_flush_asked_for_during_a_write_waits_for_it(tmp_path: Path) -> None:
    """Two writes at once could store their heads in either order (the older state
    last) and one's deletions could take a segment the other's head lists: a resumed
    driver then found a segment missing. The second waits for the first."""
    async with open_storage(tmp_path) as store:
        held = HeldHeads(store)
        journal = Journal(held, name="exp", interval=0.01)
        first = asyncio.ensure_future(journal.flush())
        while not held.under_way:
            await asyncio.sleep(0.01)
        journal.touch()
        second = asyncio.ensure_future(journal.flush())
        for _ in range(20):
            await asyncio.sleep(0)
        held.release.set()
        await asyncio.gather(first, second)
    assert held.most == 1
