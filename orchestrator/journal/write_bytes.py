"""What one journal write stores, as bytes: the segment of the rows recorded since the
last write, the sealed object of the trials it seals (:mod:`orchestrator.journal.sealed`)
and the head listing them (see :mod:`orchestrator.journal.writer`). Built off the loop,
in a thread, from what the writer captured on it."""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from orchestrator.core.json_codec import dumps
from orchestrator.engine.c_heap import give_back_freed_memory
from orchestrator.journal.spill import SpillFile, SpillRef

__all__ = ["Built", "Write", "build_timed", "segment_token"]


@dataclass
class Write:
    """What one write stores, captured on the loop: the head's parts (the live trials'),
    per trial with new results the index they start at and their serialised rows, and
    the trials it seals into a new object."""

    header: dict[str, Any]
    heads: list[str]  # the live trials' parts, in the trials' order
    rows: list[tuple[str, int, list[str] | SpillRef]]  # a spilled trial's: read back
    compact: bool
    ended: list[str]  # trials looked at that had ended: spilled once this is stored
    # The sealed objects the head keeps listing, as it lists them...
    listed: list[dict[str, Any]] = field(default_factory=list)
    # ...and the new one, if any: its key, level and serial, and per trial in it, its
    # position, where its part is in the heads file (offset, length) and its rows (in
    # the spill, or in memory); ``sealing``: the trials sealed since the last write.
    sealed_key: str | None = None
    sealed_level: int = 0
    sealed_serial: int = -1
    sealed: list[tuple[int, int, int, list[str] | SpillRef]] = field(default_factory=list)
    sealing: list[int] = field(default_factory=list)
    heads_file: SpillFile | None = None
    trim: bool = False  # give freed memory back once built (``journal/retirement.py``)


@dataclass
class Built:
    """A write's bytes: its segment (empty: none), its sealed object (empty: none) and
    the object's entry in the head, and the head."""

    segment: bytes
    sealed: bytes
    sealed_entry: dict[str, Any] | None
    head: bytes
    cpu: float  # the CPU-seconds building them took


def segment_token() -> str:
    """A driver's segment names' prefix: never used before, and in the order drivers
    started (milliseconds, then random), so that ``repair`` can replay the segments
    that survive a lost head in the order they were written."""
    return f"{time.time_ns() // 1_000_000:012x}{secrets.token_hex(2)}"


def build_timed(write: Write, segments: list[str], spill: SpillFile | None) -> Built:
    """The segment, the sealed object and the head a write stores, and the CPU-seconds
    they took (in the thread that built them; spilled rows and sealed parts are read
    back here, off the loop)."""
    start = time.thread_time()
    rows = [
        (trial_id, first, spill.get(part) if isinstance(part, SpillRef) and spill else part)
        for trial_id, first, part in write.rows
    ]
    segment = _segment(rows)  # type: ignore[arg-type]
    sealed, entry = _sealed(write, spill), None
    listed = list(write.listed)
    if write.sealed_key is not None:
        entry = {
            "key": write.sealed_key,
            "bytes": len(sealed),
            "sha256": hashlib.sha256(sealed).hexdigest(),
            "level": write.sealed_level,
            "trials": len(write.sealed),
        }
        listed.append(entry)
    head = _head(write.header, listed, segments, [part.encode() for part in write.heads])
    if write.trim:
        give_back_freed_memory()
    return Built(segment, sealed, entry, head, time.thread_time() - start)


def _sealed(write: Write, spill: SpillFile | None) -> bytes:
    """The sealed object of ``write.sealed``: a line ``{"entry", "rows"}`` per trial,
    its part read back from the heads file in one read (issue 36: not kept in memory)."""
    if write.sealed_key is None:
        return b""
    heads = write.heads_file
    end = max((at + n for _, at, n, _ in write.sealed), default=0)
    data = memoryview(heads.head_of(end)) if heads is not None and end else memoryview(b"")
    lines: list[bytes] = []
    for _, at, n, part in write.sealed:
        serialised = spill.get(part) if isinstance(part, SpillRef) and spill else part
        lines.append(
            b'{"entry":'
            + bytes(data[at : at + n])
            + b',"rows":['
            + ",".join(serialised).encode()  # type: ignore[arg-type]
            + b"]}\n"
        )
    return b"".join(lines)


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


def _head(
    header: dict[str, Any], sealed: list[dict[str, Any]], segments: list[str], heads: list[bytes]
) -> bytes:
    start = dumps({**header, "sealed": sealed, "segments": segments})[:-1] + ',"trials":['
    return start.encode() + b",".join(heads) + b"]}"
