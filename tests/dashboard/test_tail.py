"""The dashboard's journal reader: incremental (only new segments are read, an
unchanged local head not even that), equal to a full read through appends, rollbacks
and compactions by the real journal writer, and tolerant of a journal damaged or being
rewritten (a message, never an exception)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from orchestrator.core.journal_format import JOURNAL_KEY, SEGMENTS_PREFIX
from orchestrator.core.machine import TrialState
from orchestrator.journal.reader import load
from orchestrator.views.dashboard.tail import BACKUP_KEY, JournalTail
from storage import LocalStorage

from .journals import CountingStorage, Run

TRIALS = ["a", "b", "c", "d"]


async def oracle(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Every trial's results as a resuming driver reads them (the whole journal)."""
    async with LocalStorage(str(path)) as store:
        return {t.id: t.results for t in await load(store) or []}


def reader(path: Path) -> tuple[JournalTail, CountingStorage]:
    store = CountingStorage(str(path))
    return JournalTail(store, "", str(path)), store


async def test_only_what_is_new_is_read(tmp_path: Path) -> None:
    run = Run(LocalStorage(str(tmp_path), create=True), TRIALS)
    for trial in TRIALS:
        run.report(trial, loss=1.0)
    await run.write()
    tail, store = reader(tmp_path)
    await tail.refresh(results=True)
    first = list(store.reads)
    assert first[0] == JOURNAL_KEY and all(k.startswith(SEGMENTS_PREFIX) for k in first[1:])

    store.reads.clear()
    await tail.refresh()
    assert store.reads == []  # the head's file did not change: not even read

    run.report("a", loss=0.5)
    await run.write()
    store.reads.clear()
    await tail.refresh()
    head = json.loads((tmp_path / JOURNAL_KEY).read_text())
    assert store.reads == [JOURNAL_KEY, head["segments"][-1]]  # the head and the new segment
    assert {t: tail.results(t) for t in TRIALS} == await oracle(tmp_path)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_a_page_fed_changes_holds_what_a_full_read_does(tmp_path: Path, seed: int) -> None:
    """Random reports, rollbacks and endings, written by the real writer (which compacts
    its segments as it goes); after each write, the tail equals a full read, and a page
    that applied only the changes (rows from the index each names) holds the same."""
    rng = random.Random(seed)
    run = Run(LocalStorage(str(tmp_path), create=True), TRIALS)
    tail, store = reader(tmp_path)
    page: dict[str, list[dict[str, Any]]] = {}
    seen = tail.version
    compactions = 0
    listed_before: list[str] = []
    for _ in range(80):
        for trial in rng.sample(TRIALS, rng.randint(1, len(TRIALS))):
            for _ in range(rng.randint(1, 4)):
                run.report(trial, loss=rng.random(), acc=math.nan if rng.random() < 0.1 else 0.5)
        if rng.random() < 0.15:
            trial = rng.choice(TRIALS)
            run.roll_back(trial, rng.randint(0, len(run.trials[trial].results)))
        await run.write()
        store.reads.clear()
        await tail.refresh(results=True)
        listed = json.loads((tmp_path / JOURNAL_KEY).read_text())["segments"]
        if listed[: len(listed_before)] != listed_before:
            compactions += 1
        else:  # the head and only the segments it newly lists
            assert store.reads == [JOURNAL_KEY, *listed[len(listed_before) :]]
        listed_before = listed
        change = tail.changes_since(seen)
        assert change is not None
        for trial, first in change.results.items():
            page[trial] = page.get(trial, [])[:first] + tail.results(trial)[first:]
        seen = tail.version
        expected = await oracle(tmp_path)
        assert _comparable({t: tail.results(t) for t in TRIALS}) == _comparable(expected)
        assert _comparable({t: page.get(t, []) for t in TRIALS}) == _comparable(expected)
        assert tail.problem is None
    assert compactions >= 2  # the writer rewrote its base: the tail followed


def _comparable(results: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """NaN equals nothing, itself included: compare through its JSON spelling."""
    return json.loads(json.dumps(results))  # type: ignore[no-any-return]


async def test_a_segment_compacted_away_between_reads_is_read_again(tmp_path: Path) -> None:
    """A head read just before the writer compacted lists segments that are gone when
    read: the tail reads the new head instead, and says nothing is wrong."""
    run = Run(LocalStorage(str(tmp_path), create=True), TRIALS)
    run.report("a", loss=1.0)
    await run.write()
    stale = (tmp_path / JOURNAL_KEY).read_bytes()
    gone = json.loads(stale)["segments"]

    class Racing(CountingStorage):
        """Serves the stale head once, as if read just before the compaction."""

        async def read_bytes(self, key: str) -> bytes:
            if key == JOURNAL_KEY and not self.reads:
                self.reads.append(key)
                return stale
            return await super().read_bytes(key)

    run.journal._segments = [*run.journal._segments] * 40  # the next write compacts
    run.report("a", loss=0.5)
    await run.write()
    assert not (tmp_path / gone[0]).exists()
    tail = JournalTail(Racing(str(tmp_path)), "", str(tmp_path))
    await tail.refresh(results=True)
    assert tail.problem is None
    assert [r["loss"] for r in tail.results("a")] == [1.0, 0.5]


async def test_non_finite_values_read_tagged_or_bare(tmp_path: Path) -> None:
    head = {
        "format": 2,
        "segments": [f"{SEGMENTS_PREFIX}/s.jsonl"],
        "trials": [{"id": "t", "state": "RUNNING", "checkpoints": [], "results_count": 3}],
    }
    rows = (
        '{"trial": "t", "from": 0, "rows": [{"loss": {"$float": "NaN"}, "x": 1}, '
        '{"loss": {"$float": "-Infinity"}, "x": 2}]}\n'
        '{"trial": "t", "from": 2, "rows": [{"loss": NaN, "x": 3}]}\n'
    )
    (tmp_path / SEGMENTS_PREFIX).mkdir()
    (tmp_path / SEGMENTS_PREFIX / "s.jsonl").write_text(rows)
    (tmp_path / JOURNAL_KEY).write_text(json.dumps(head))
    tail, _ = reader(tmp_path)
    await tail.refresh(results=True)
    losses = [r["loss"] for r in tail.results("t")]
    assert math.isnan(losses[0]) and losses[1] == -math.inf and math.isnan(losses[2])
    assert tail.problem is None


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"format": 2, "trials": [{"id": "a", "sta', "truncated"),
        ("", "is empty"),
        ('{"format": 2, "trials": 3}', "no 'trials' list"),
        ('{"format": 2, "segments": ["../../etc/passwd"], "trials": []}', "segments"),
        ('{"format": 2, "trials": [{"state": "RUNNING"}]}', "no trial id"),
        ("[1, 2]", "not a journal head"),
    ],
)
async def test_a_damaged_head_is_a_message_and_what_was_read_stays(
    tmp_path: Path, text: str, words: str
) -> None:
    run = Run(LocalStorage(str(tmp_path), create=True), TRIALS)
    run.report("a", loss=1.0)
    await run.write()
    tail, _ = reader(tmp_path)
    await tail.refresh(results=True)
    good = (tmp_path / JOURNAL_KEY).read_bytes()
    version = tail.version

    (tmp_path / JOURNAL_KEY).write_text(text)
    await tail.refresh()
    assert tail.problem is not None and words in tail.problem, tail.problem
    assert str(tmp_path / JOURNAL_KEY) in tail.problem
    assert list(tail.entries) == TRIALS and len(tail.results("a")) == 1  # as last read
    assert tail.version > version  # pages are told

    (tmp_path / JOURNAL_KEY).write_bytes(good)  # repaired
    await tail.refresh()
    assert tail.problem is None


async def test_a_damaged_head_is_shown_from_its_backup(tmp_path: Path) -> None:
    run = Run(LocalStorage(str(tmp_path), create=True), TRIALS)
    run.report("b", loss=2.0)
    await run.write()
    (tmp_path / BACKUP_KEY).write_bytes((tmp_path / JOURNAL_KEY).read_bytes())
    (tmp_path / JOURNAL_KEY).write_text('{"format": 2, "tri')
    tail, _ = reader(tmp_path)
    await tail.refresh(results=True)
    assert tail.problem is not None
    assert "truncated" in tail.problem and "shown from its backup" in tail.problem
    assert list(tail.entries) == TRIALS and tail.results("b")[0]["loss"] == 2.0


async def test_a_damaged_segment_names_itself_and_its_line(tmp_path: Path) -> None:
    run = Run(LocalStorage(str(tmp_path), create=True), TRIALS)
    run.report("a", loss=1.0)
    run.report("b", loss=1.0)
    await run.write()
    key = json.loads((tmp_path / JOURNAL_KEY).read_text())["segments"][0]
    lines = (tmp_path / key).read_text().splitlines()
    (tmp_path / key).write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2] + "\n")
    tail, _ = reader(tmp_path)
    await tail.refresh(results=True)
    assert tail.problem is not None
    assert str(tmp_path / key) in tail.problem and "line 2" in tail.problem
    assert len(tail.results("a")) == 1  # the whole line before the damage is shown


async def test_no_journal_yet_is_a_message(tmp_path: Path) -> None:
    tail, _ = reader(tmp_path)
    await tail.refresh(results=True)
    assert tail.problem is not None and "no journal" in tail.problem
    assert tail.entries == {}


async def test_a_format_1_head_shows_its_inline_results(tmp_path: Path) -> None:
    entry = {"id": "old", "state": "TERMINATED", "results": [{"loss": 3.0}, {"loss": 2.0}]}
    (tmp_path / JOURNAL_KEY).write_text(json.dumps({"trials": [entry]}))
    tail, _ = reader(tmp_path)
    await tail.refresh(results=True)
    assert [r["loss"] for r in tail.results("old")] == [3.0, 2.0]


async def test_changes_merge_and_a_version_too_old_asks_for_everything(tmp_path: Path) -> None:
    run = Run(LocalStorage(str(tmp_path), create=True), TRIALS)
    tail, _ = reader(tmp_path)
    await run.write()
    await tail.refresh(results=True)
    start = tail.version
    run.report("a", loss=1.0)
    await run.write()
    await tail.refresh()
    run.report("b", loss=1.0)
    run.end("c", TrialState.ERROR, "boom")
    await run.write()
    await tail.refresh()
    change = tail.changes_since(start)
    assert change is not None
    assert dict(change.results) == {"a": 0, "b": 0} and {"a", "b", "c"} <= change.trials
    assert tail.changes_since(tail.version) == type(change)(tail.version)
    assert tail.changes_since(-5) is None
    tail.drop_results()
    assert tail.changes_since(start) is None
