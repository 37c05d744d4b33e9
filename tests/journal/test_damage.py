"""What a damaged journal says about itself (which object, what is wrong) and what a
truncated head still holds, on heads and segments written by the real journal writer
(no Ray)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator import Orchestrator
from orchestrator.core.journal_format import BACKUP_KEY, JOURNAL_KEY, SEGMENTS_PREFIX
from orchestrator.errors import JournalDamaged
from orchestrator.journal.damage import (
    damage_of,
    parse_head,
    parse_segment,
    salvage_head,
    salvage_segment,
)
from orchestrator.journal.reader import load as load_journal
from orchestrator.journal.writer import Journal
from storage import open_storage

from ..support.trainables import Counter

EXPERIMENT = "/runs/exp"


async def written_journal(tmp_path: Path) -> tuple[bytes, bytes, Path]:
    """A head (3 trials with results, a sweep-like extra field) and its one segment, as
    the journal writes them, and the store's root."""
    orch = Orchestrator(storage=tmp_path / "unused", name="exp")
    trials = [orch.add_trial(Counter, {"i": i}, trial_id=f"t{i}") for i in range(3)]
    root = tmp_path / "store"
    async with open_storage(root, create=True) as store:
        journal = Journal(store, name="exp", interval=0.01)
        journal.set_extras(lambda: {"sweeps": [{"name": "s", "created": ["t0"]}]})
        for trial in trials:
            journal.track(trial._rt)
            for n in range(3):
                journal.record_result(trial._rt, {"training_iteration": n + 1, "n": n})
        await journal.flush()
        head = await store.read_bytes(JOURNAL_KEY)
        (segment,) = json.loads(head)["segments"]
        assert await store.read_bytes(BACKUP_KEY) == head  # the backup: the same write
        return head, await store.read_bytes(segment), root


def test_what_is_wrong_is_said_in_words() -> None:
    assert damage_of(b'{"a": [1, 2]}') is None
    assert damage_of(b"") == "is empty (0 bytes)"
    assert damage_of(b"  \n") == "is empty (3 bytes)"
    assert damage_of(b'{"a": [1, 2') == (
        "is truncated: it ends after 11 bytes, in the middle of its JSON document"
    )
    assert damage_of(b'{"a": "an unfinished str') is not None
    assert "truncated" in str(damage_of(b'{"a": "an unfinished str'))
    assert damage_of(b'{"a": 1} trailing') == ("is not JSON at byte 9 of 17 (Extra data)")
    assert damage_of(b'{"a": \xff}') == "is not text: byte 6 of 8 is not UTF-8"


async def test_a_head_cut_anywhere_names_itself_and_keeps_what_precedes_the_cut(
    tmp_path: Path,
) -> None:
    head, _, _ = await written_journal(tmp_path)
    full_header, full_entries = salvage_head(head)
    assert [e["id"] for e in full_entries] == ["t0", "t1", "t2"]
    assert full_header["sweeps"] == [{"name": "s", "created": ["t0"]}]
    found = []
    for cut in range(0, len(head), 7):
        with pytest.raises(JournalDamaged) as caught:
            parse_head(head[:cut], f"{EXPERIMENT}/{JOURNAL_KEY}", EXPERIMENT)
        error = caught.value
        assert error.where == f"{EXPERIMENT}/{JOURNAL_KEY}" and error.uri == EXPERIMENT
        assert error.what in (
            "is empty (0 bytes)",
            f"is truncated: it ends after {cut} bytes, in the middle of its JSON document",
        )
        assert "python -m orchestrator repair --storage /runs --name exp" in str(error)
        header, entries = salvage_head(head[:cut])
        assert all(header[k] == full_header[k] for k in header)  # a prefix: never wrong
        assert entries == full_entries[: len(entries)]
        found.append(len(entries))
    assert found == sorted(found) and {0, 1, 2} <= set(found)  # more survive a later cut


def test_an_entry_without_its_fields_is_named() -> None:
    head = {"format": 2, "segments": [], "trials": [{"id": "a", "state": "RUNNING"}]}
    with pytest.raises(
        JournalDamaged, match="trial entry \\(#0\\): trial 'a' has no 'checkpoints', 'resources'"
    ):
        parse_head(json.dumps(head).encode(), "h", EXPERIMENT)
    with pytest.raises(JournalDamaged, match="is not a journal head: it has no 'trials' list"):
        parse_head(b'{"format": 2}', "h", EXPERIMENT)


async def test_a_damaged_segment_is_named_by_line(tmp_path: Path) -> None:
    _, segment, _ = await written_journal(tmp_path)
    lines = segment.splitlines(keepends=True)
    assert len(parse_segment(segment, "s", EXPERIMENT)) == 3
    cut = segment[: len(segment) - 5]
    with pytest.raises(JournalDamaged, match=r"s is truncated: line 3 ends after \d+ bytes"):
        parse_segment(cut, "s", EXPERIMENT)
    assert [p["trial"] for p in salvage_segment(cut)] == ["t0", "t1"]
    garbled = lines[0] + b"garbage\n" + lines[2]
    with pytest.raises(JournalDamaged, match=rf"damaged line 2 \(at byte {len(lines[0])}\)"):
        parse_segment(garbled, "s", EXPERIMENT)
    assert [p["trial"] for p in salvage_segment(garbled)] == ["t0", "t2"]


async def test_loading_a_damaged_journal_names_the_object(tmp_path: Path) -> None:
    head, segment, root = await written_journal(tmp_path)
    async with open_storage(root) as store:
        (key,) = json.loads(head)["segments"]
        await store.write_bytes(key, segment[:-3])
        with pytest.raises(JournalDamaged, match=rf"{root / SEGMENTS_PREFIX}/.* is truncated"):
            await load_journal(store)
        await store.delete(JOURNAL_KEY)
        with pytest.raises(JournalDamaged, match=rf"{root / JOURNAL_KEY} is missing \(its backup"):
            await load_journal(store)
