"""What one journal write stores, as bytes: the segment of the rows recorded since the
last write and the head listing it (see :mod:`orchestrator.journal.writer`). Built off
the loop, in a thread, from what the writer captured on it."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

from orchestrator.core.json_codec import dumps
from orchestrator.journal.spill import SpillFile, SpillRef

__all__ = ["Write", "build_timed", "segment_token"]


@dataclass
class Write:
    """What one write stores, captured on the loop: the head's parts and, per trial
    with new results, the index they start at and their serialised rows."""

    header: dict[str, Any]
    heads: list[str]
    rows: list[tuple[str, int, list[str] | SpillRef]]  # a spilled trial's: read back
    compact: bool
    ended: list[str]  # trials looked at that had ended: spilled once this is stored


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
    head = _head(write.header, segments, write.heads)
    return segment, head, time.thread_time() - start


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


def _head(header: dict[str, Any], segments: list[str], heads: list[str]) -> bytes:
    return (
        dumps({**header, "segments": segments})[:-1] + ',"trials":[' + ",".join(heads) + "]}"
    ).encode()
