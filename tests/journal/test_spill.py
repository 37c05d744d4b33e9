"""The journal's spill file and its references (``journal/spill.py``; issue 36, item 3).

Every finished trial keeps two references into the spill file for the whole experiment
(its rows', its tombstone's): each is one small int, read as its three fields."""

from __future__ import annotations

import pickle
import tracemalloc

import pytest

from orchestrator.journal.spill import SpillFile, SpillRef


def test_rows_and_blobs_come_back_from_where_their_references_say() -> None:
    spill = SpillFile()
    rows = spill.put(['{"a": 1}', '{"a": 2}'])
    blob = spill.put_blob(b"\x00sealed")
    spill.flush()
    assert (rows.offset, rows.length, rows.count) == (0, 17, 2)
    assert (blob.offset, blob.length, blob.count) == (17, 7, 0)
    assert spill.get(rows) == ['{"a": 1}', '{"a": 2}'] and spill.get_blob(blob) == b"\x00sealed"
    assert spill.history(rows) == [{"a": 1}, {"a": 2}]
    assert spill.head_of(17) == b'{"a": 1}\n{"a": 2}'
    assert spill.get(SpillRef(24, 0, 0)) == []


def test_a_reference_is_a_value_compared_by_its_fields() -> None:
    ref = SpillRef(2**40 + 3, 2**32 - 1, 7)
    assert (ref.offset, ref.length, ref.count) == (2**40 + 3, 2**32 - 1, 7)
    assert ref == SpillRef(2**40 + 3, 2**32 - 1, 7) and ref != SpillRef(2**40 + 3, 7, 7)
    assert len({ref, SpillRef(2**40 + 3, 2**32 - 1, 7)}) == 1
    assert repr(ref) == f"SpillRef(offset={2**40 + 3}, length={2**32 - 1}, count=7)"
    again = pickle.loads(pickle.dumps(ref))
    assert type(again) is SpillRef and again == ref
    for bad in ((0, 2**32, 0), (0, 0, 2**32), (-1, 0, 0)):
        with pytest.raises(ValueError, match="out of range"):
            SpillRef(*bad)


def test_a_reference_costs_a_small_int() -> None:
    """Not an object of three ints (some 110 bytes at the offsets of a large file)."""
    spill = SpillFile()
    spill.put_blob(b"x" * 5_000_000)  # offsets past the small ints Python shares
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        refs = [spill.put_blob(b"blob of a sealed trial") for _ in range(1000)]
        per_ref = (tracemalloc.get_traced_memory()[0] - before - 8 * len(refs)) / len(refs)
    finally:
        tracemalloc.stop()
    assert per_ref <= 64, f"{per_ref:.0f} bytes a reference"
