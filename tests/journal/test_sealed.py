"""Sealed journal objects (format 3, issue 36): a settled trial's part leaves the head,
once, for an immutable object the head lists with its size and SHA-256. The head holds
the live trials only; a trial that comes back overrides its sealed copy; objects merge
LSM-style and the merged ones go once a head no longer lists them; a missing, short or
altered object is named, and ``repair`` salvages what it still holds."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import orchestrator.journal.sealed as sealed_module
from orchestrator import Orchestrator, Trial, TrialState
from orchestrator.core.journal_format import (
    BACKUP_KEY,
    FORMAT_VERSION,
    JOURNAL_KEY,
    SEALED_PREFIX,
)
from orchestrator.errors import JournalDamaged, JournalError
from orchestrator.journal.reader import load_experiment
from orchestrator.journal.repair import repair_experiment
from orchestrator.journal.writer import Journal
from storage import Storage, StorageError, open_storage

from ..support.servers import (  # noqa: F401  (fixtures)
    BUCKET,
    GCS_OPTIONS,
    aws_env,
    gcs_url,
    moto_url,
    unique_prefix,
)
from ..support.slow_storage import StorageView
from ..support.trainables import Counter

HEADS = (JOURNAL_KEY, BACKUP_KEY)


@pytest.fixture(params=["file", "s3", "gs"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Storage]:
    """The experiment's storage on each backend: local, S3 (moto), GCS (the emulator)."""
    if request.param == "file":
        opened = open_storage(tmp_path / "store", create=True)
    elif request.param == "s3":
        url = request.getfixturevalue("moto_url")
        opened = open_storage(f"s3://{BUCKET}/{unique_prefix()}", endpoint_url=url)
    else:
        url = request.getfixturevalue("gcs_url")
        opened = open_storage(f"gs://{BUCKET}/{unique_prefix()}", api_root=url, **GCS_OPTIONS)
    async with opened as st:
        yield st


def _trials(tmp_path: Path, count: int) -> list[Trial]:
    orch = Orchestrator(storage=tmp_path / "unused", name="exp")
    return [orch.add_trial(Counter, trial_id=f"t{i:03d}") for i in range(count)]


class Refusing(StorageView):
    """Writes of the keys in ``refuse`` fail (the rest land)."""

    def __init__(self, store: Storage) -> None:
        super().__init__(store)
        self.refuse: tuple[str, ...] = ()
        self.written: list[tuple[str, int]] = []

    async def write_bytes(self, key: str, data: bytes) -> None:
        if key in self.refuse:
            raise StorageError(f"{key}: refused (test)")
        self.written.append((key, len(data)))
        await self.store.write_bytes(key, data)


async def _head(store: Storage) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(await store.read_bytes(JOURNAL_KEY))
    return doc


async def _results(store: Storage) -> dict[str, list[int]]:
    contents = await load_experiment(store)
    assert contents is not None
    return {t.id: [r["n"] for r in t.results] for t in contents.trials}


def _end(journal: Journal, trial: Trial, *ns: int) -> None:
    for n in ns:
        trial._rt.results.append({"n": n})
        journal.record_result(trial._rt, {"n": n})
    trial._rt.machine._state = TrialState.TERMINATED
    journal.changed(trial._rt)


async def _ended_one_by_one(store: Storage, trials: list[Trial]) -> tuple[Journal, dict]:
    """A journal whose trials end one a write (two results each); what it holds."""
    journal = Journal(store, name="exp", interval=0.01)
    for trial in trials:
        journal.track(trial._rt)
    expected: dict[str, list[int]] = {t.id: [] for t in trials}
    await journal.flush()
    for index, trial in enumerate(trials):
        _end(journal, trial, 2 * index, 2 * index + 1)
        expected[trial.id] = [2 * index, 2 * index + 1]
        await journal.flush()
    await journal.flush()  # the last one sealed
    return journal, expected


async def test_sealed_trials_leave_the_head_and_read_back_in_order(
    tmp_path: Path, store: Storage
) -> None:
    trials = _trials(tmp_path, 12)
    raw, store = store, Refusing(store)
    journal, expected = await _ended_one_by_one(store, trials)
    head = await _head(raw)
    assert head["format"] == FORMAT_VERSION >= 3
    assert len(head["trials"]) <= 1  # only trials not sealed yet are live parts
    listed = head["sealed"]
    assert listed and all(o["key"].startswith(SEALED_PREFIX + "/") for o in listed)
    assert sorted(await raw.list(SEALED_PREFIX)) == sorted(o["key"] for o in listed)
    contents = await load_experiment(raw)
    assert contents is not None
    assert [t.id for t in contents.trials] == [t.id for t in trials]
    assert await _results(raw) == expected
    assert all(t.state == "TERMINATED" for t in contents.trials)
    # A write now costs what changed: the head no longer holds the sealed trials.
    store.written.clear()
    journal.touch()
    await journal.flush()
    assert max(size for _, size in store.written) < 2_000


async def test_objects_merge_past_a_bound_and_the_merged_ones_go(
    tmp_path: Path, store: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sealed_module, "SEAL_FANOUT", 3)
    trials = _trials(tmp_path, 20)
    journal, expected = await _ended_one_by_one(store, trials)
    head = await _head(store)
    levels = [o["level"] for o in head["sealed"]]
    # At most FANOUT - 1 objects of a level, the older the higher.
    assert levels == sorted(levels, reverse=True)
    assert all(levels.count(level) <= 2 for level in set(levels)), levels
    assert max(levels) >= 2
    assert sorted(await store.list(SEALED_PREFIX)) == sorted(o["key"] for o in head["sealed"])
    assert await _results(store) == expected
    await journal.aclose()


async def test_a_trial_that_comes_back_overrides_its_sealed_copy(tmp_path: Path) -> None:
    trials = _trials(tmp_path, 3)
    async with open_storage(tmp_path / "store", create=True) as store:
        journal, expected = await _ended_one_by_one(store, trials)
        back = trials[0]._rt
        assert not (await _head(store))["trials"]
        back.machine._state = TrialState.RUNNING  # restored: a rollback and a new result
        back.results = list(back.results)  # as the loop does for a trial that comes back
        journal.truncate(back, 1)
        journal.record_result(back, {"n": 50})
        await journal.flush()
        head = await _head(store)
        assert [e["id"] for e in head["trials"]] == [back.id]
        expected[back.id] = [0, 50]
        assert await _results(store) == expected
        contents = await load_experiment(store)
        assert contents is not None
        assert [t.id for t in contents.trials] == [t.id for t in trials]
        assert contents.trials[0].state == "RUNNING"
        _end(journal, trials[0], 51)  # and ends again: sealed again, in a later object
        expected[back.id].append(51)
        for _ in range(3):
            await journal.flush()
        assert not (await _head(store))["trials"]
        assert await _results(store) == expected


async def test_a_crash_between_object_and_head_leaves_an_unlisted_object(
    tmp_path: Path, store: Storage
) -> None:
    """The object is stored, the head is not (the driver died, or storage refused):
    the journal reads as before, the trials are sealed again by the next write, and the
    unlisted object goes after the next merge or base."""
    trials = _trials(tmp_path, 4)
    raw, store = store, Refusing(store)
    journal = Journal(store, name="exp", interval=0.01)
    for trial in trials:
        journal.track(trial._rt)
    await journal.flush()
    _end(journal, trials[0], 0, 1)
    await journal.flush()  # ended: sealed after this write...
    store.refuse = HEADS  # ...into an object whose head never lands
    await journal.flush()
    orphans = await raw.list(SEALED_PREFIX)
    assert orphans and not (await _head(raw)).get("sealed")
    assert (await _results(raw))[trials[0].id] == [0, 1]
    store.refuse = ()
    await journal.flush()
    head = await _head(raw)
    assert [o["key"] for o in head["sealed"]] != orphans
    assert (await _results(raw))[trials[0].id] == [0, 1]
    journal._segments = ["x"] * 64  # the next write is a base: it sweeps the orphan
    journal.touch()
    await journal.flush()
    assert await raw.list(SEALED_PREFIX) == [o["key"] for o in (await _head(raw))["sealed"]]


async def _damage(store: Storage, key: str, how: str) -> None:
    """Damage the object at ``key`` through the storage (as a copy cut short, a lost
    object, a flipped byte would)."""
    data = await store.read_bytes(key)
    if how == "missing":
        await store.delete(key)
    elif how == "truncated":
        await store.write_bytes(key, data[: len(data) // 2])
    elif how == "zeroed":  # a disk that lost the blocks: the size survived
        await store.write_bytes(key, bytes(len(data)))
    elif how == "bad-hash":  # same size, one byte changed: only the hash tells
        index = data.index(b'"n":') + 4
        await store.write_bytes(key, data[:index] + b"7" + data[index + 1 :])


@pytest.mark.parametrize("how", ["missing", "truncated", "zeroed", "bad-hash"])
async def test_a_damaged_sealed_object_is_named_and_repaired(
    tmp_path: Path, store: Storage, how: str
) -> None:
    trials = _trials(tmp_path, 4)
    journal, expected = await _ended_one_by_one(store, trials)
    await journal.aclose()
    head = await _head(store)
    victim = head["sealed"][0]["key"]
    await _damage(store, victim, how)
    with pytest.raises(JournalDamaged) as caught:
        await load_experiment(store)
    assert caught.value.where == store.uri_for(victim)
    word = {
        "missing": "is missing",
        "truncated": "is truncated",
        "zeroed": "altered",
        "bad-hash": "altered",
    }
    assert word[how] in caught.value.what
    report = await repair_experiment(store)
    assert any(d.where == store.uri_for(victim) for d in report.damaged), report
    contents = await load_experiment(store)
    assert contents is not None
    got = {t.id: [r["n"] for r in t.results] for t in contents.trials}
    held = head["sealed"][0]["trials"]
    if how in ("missing", "zeroed"):  # its entries are gone: said, and counted
        assert len(got) == len(trials) - held and report.entries_lost == held
        assert not report.complete
    elif how == "truncated":  # the whole records before the cut are kept
        assert 0 < report.entries_lost <= held and len(got) == len(trials) - report.entries_lost
        assert not report.complete
    else:  # every record still reads (one value altered): each entry is kept
        assert set(got) == {t.id for t in trials} and report.entries_lost == 0
    for trial_id, rows in got.items():
        if how != "bad-hash":
            assert rows == expected[trial_id]
    assert any("sealed trial entr" in line for line in report.lines()) == (how != "bad-hash")


async def test_a_journal_of_a_newer_format_is_refused(tmp_path: Path) -> None:
    trials = _trials(tmp_path, 1)
    async with open_storage(tmp_path / "store", create=True) as store:
        journal = Journal(store, name="exp", interval=0.01)
        journal.track(trials[0]._rt)
        await journal.flush()
        head = await _head(store)
        head["format"] = FORMAT_VERSION + 1
        await store.write_bytes(JOURNAL_KEY, json.dumps(head).encode())
        with pytest.raises(JournalError, match="newer orchestrator") as caught:
            await load_experiment(store)
        assert not isinstance(caught.value, JournalDamaged)


async def test_ls_show_and_the_dashboard_read_sealed_trials(tmp_path: Path) -> None:
    """What people see reads the sealed objects too: ``show`` (``read_experiment``) and
    the dashboard's tail list every trial with its results, and the dashboard follows a
    merge (the objects it had read are gone, their trials in the new one)."""
    from orchestrator.views.dashboard.tail import JournalTail
    from orchestrator.views.experiments import read_experiment

    trials = _trials(tmp_path, 9)
    async with open_storage(tmp_path / "store", create=True) as store:
        journal = Journal(store, name="exp", interval=0.01)
        for trial in trials:
            journal.track(trial._rt)
        await journal.flush()
        tail = JournalTail(store, "", store.uri)
        expected: dict[str, list[int]] = {t.id: [] for t in trials}
        for index, trial in enumerate(trials):
            _end(journal, trial, index)
            expected[trial.id] = [index]
            await journal.flush()
            await tail.refresh(results=True)
            assert tail.problem is None, tail.problem
            shown = {t: [r["n"] for r in tail.results(t)] for t in tail.entries}
            assert list(tail.entries) == [t.id for t in trials]
            assert {t: rows for t, rows in shown.items() if rows} == {
                t: rows for t, rows in expected.items() if rows
            }
        assert any(o["level"] >= 1 for o in (await _head(store))["sealed"])  # merged
        record = await read_experiment(store)
        assert record is not None
        assert {t.id: [r["n"] for r in t.results] for t in record.trials} == expected
        assert [t.state for t in record.trials] == ["TERMINATED"] * 9


async def test_a_write_stored_but_not_recorded_loses_no_sealed_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head landed, then recording it failed (a bug, a memory error): the writer
    deletes nothing that head may list, and the trials it sealed are sealed again."""
    trials = _trials(tmp_path, 6)
    async with open_storage(tmp_path / "store", create=True) as store:
        journal, expected = await _ended_one_by_one(store, trials[:3])
        for trial in trials[3:]:
            journal.track(trial._rt)
        expected.update({t.id: [] for t in trials[3:]})
        _end(journal, trials[3], 100)
        expected[trials[3].id] = [100]
        await journal.flush()  # trials[3] is sealed after this write: in the next object
        real = Journal._committed
        calls = {"n": 0}

        def failing_once(self: Journal, *args: Any, **kwargs: Any) -> bool:
            calls["n"] += 1
            if calls["n"] == 1:
                raise MemoryError("test")
            return real(self, *args, **kwargs)

        monkeypatch.setattr(Journal, "_committed", failing_once)
        journal._segments = ["x"] * 64  # a base: it deletes what the head does not list
        journal.touch()
        await journal.flush()
        assert calls["n"] == 1 and journal.failed_writes == 1
        assert await _results(store) == expected
        for _ in range(3):
            journal.touch()
            await journal.flush()
            assert await _results(store) == expected
        head = await _head(store)
        assert sorted(await store.list(SEALED_PREFIX)) == sorted(o["key"] for o in head["sealed"])


async def test_a_merge_keeps_each_trial_once_as_it_is_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trials that came back (live again, or sealed again in a later object) leave
    their older copies behind: a merge keeps each trial once, as it is now."""
    monkeypatch.setattr(sealed_module, "SEAL_FANOUT", 3)
    trials = _trials(tmp_path, 12)
    async with open_storage(tmp_path / "store", create=True) as store:
        journal, expected = await _ended_one_by_one(store, trials[:4])
        for trial, n in ((trials[0], 40), (trials[1], 41)):  # back, and one ends again
            trial._rt.machine._state = TrialState.RUNNING
            trial._rt.results = list(trial._rt.results)
            trial._rt.results.append({"n": n})
            journal.record_result(trial._rt, {"n": n})
            expected[trial.id].append(n)
        await journal.flush()
        _end(journal, trials[1])
        for trial in trials[4:]:
            journal.track(trial._rt)
            expected[trial.id] = []
        for index, trial in enumerate(trials[4:], start=4):
            _end(journal, trial, 2 * index)
            expected[trial.id] = [2 * index]
            await journal.flush()
            assert await _results(store) == expected, index
        for _ in range(2):  # the last one sealed
            journal.touch()
            await journal.flush()
        head = await _head(store)
        assert [e["id"] for e in head["trials"]] == [trials[0].id]  # the live one
        held: list[str] = []
        for item in head["sealed"]:
            lines = (await store.read_bytes(item["key"])).splitlines()
            assert len(lines) == item["trials"]
            held += [json.loads(line)["entry"]["id"] for line in lines]
        assert max(o["level"] for o in head["sealed"]) >= 1
        assert trials[0].id not in held and len(held) == len(set(held)) == 11
        assert await _results(store) == expected
