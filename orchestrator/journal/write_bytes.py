"""What one journal write stores, as bytes: the segment of the rows recorded since the
last write and the head listing it (see :mod:`orchestrator.journal.writer`). Built off
the loop, in a thread, from what the writer captured on it."""

from __future__ import annotations

import secrets
import time
from array import array
from dataclasses import dataclass
from typing import Any

from orchestrator.core.json_codec import dumps
from orchestrator.journal.retirement import give_back_freed_memory
from orchestrator.journal.spill import SpillFile, SpillRef

__all__ = ["Write", "build_timed", "segment_token"]


@dataclass
class Write:
    """What one write stores, captured on the loop: the head's parts and, per trial
    with new results, the index they start at and their serialised rows."""

    header: dict[str, Any]
    heads: list[str | None]  # None: a sealed trial's part, in ``sealed_heads``
    rows: list[tuple[str, int, list[str] | SpillRef]]  # a spilled trial's: read back
    compact: bool
    ended: list[str]  # trials looked at that had ended: spilled once this is stored
    # Where the sealed trials' parts are: the file, and per trial its offset in it (-1:
    # not there) and its length, as arrays copied on the loop.
    sealed_heads: tuple[SpillFile, array[int], array[int]] | None = None
    trim: bool = False  # give freed memory back once built (``journal/retirement.py``)


def segment_token() -> str:
    """A driver's segment names' prefix: never used before, and in the order drivers
    started (milliseconds, then random), so that ``repair`` can replay the segments
    that survive a lost head in the order they were written."""
    return f"{time.time_ns() // 1_000_000:012x}{secrets.token_hex(2)}"


def build_timed(
    write: Write, segments: list[str], spill: SpillFile | None
) -> tuple[bytes, bytes, float]:
    """The segment and the head a write stores, and the CPU-seconds they took (in the
    thread that built them; spilled rows are read back here, off the loop)."""
    start = time.thread_time()
    rows = [
        (trial_id, first, spill.get(part) if isinstance(part, SpillRef) and spill else part)
        for trial_id, first, part in write.rows
    ]
    segment = _segment(rows)  # type: ignore[arg-type]
    head = _head(write.header, segments, _parts(write))
    if write.trim:
        give_back_freed_memory()
    return segment, head, time.thread_time() - start


def _parts(write: Write) -> list[bytes]:
    """Every trial's part of the head, as bytes: the sealed trials' read back from their
    file in one read (issue 36: they are not kept in the driver's memory)."""
    if write.sealed_heads is None:
        return [part.encode() for part in write.heads if part is not None]
    heads, offsets, lengths = write.sealed_heads
    end = max((at + n for at, n in zip(offsets, lengths, strict=True) if at >= 0), default=0)
    data = memoryview(heads.head_of(end))
    parts: list[bytes] = []
    for part, at, n in zip(write.heads, offsets, lengths, strict=True):
        if part is not None:
            parts.append(part.encode())
        else:
            parts.append(bytes(data[at : at + n]))
    return parts


def _segment(rows: list[tuple[str, int, list[str]]]) -> bytes:
    """The segment holding ``rows``, one line per trial (empty: none)."""
    return "".join(
        '{"trial":'
        + dumps(trial_id)
        + ',"from":'
        + str(first)
        + ',"rows":['
        + ",".join(serialised)
        + "]}\n"
        for trial_id, first, serialised in rows
    ).encode()


def _head(header: dict[str, Any], segments: list[str], heads: list[bytes]) -> bytes:
    start = dumps({**header, "segments": segments})[:-1] + ',"trials":['
    return start.encode() + b",".join(heads) + b"]}"
