"""Where the journal keeps finished trials' serialised results out of memory.

Once a write has stored every result of a trial that ended (TERMINATED or ERROR, and
settled), the rows are in storage, and the driver need not hold them: the journal
appends them to one local, anonymous temporary file and keeps their place
(:class:`SpillRef`: offset, length, count). It reads them back for a new base (the
compaction rewrites every result), for the trial's history when someone asks
(:class:`~orchestrator.engine.history.SpilledHistory`), and for good if the trial comes
back. Nothing is spilled that storage does not hold; the file is only the driver's
cache of it, deleted by the operating system when the last reader lets it go.

It also holds finished trials' sealed records (:mod:`orchestrator.engine.tombstone`:
their spec, machine, config and events, pickled), as blobs.

Appends happen on the loop (a buffered write of a few hundred bytes per finished
trial, flushed once per journal write); reads use ``os.pread`` and may run in any
thread.
"""

from __future__ import annotations

import os
import tempfile
import threading
from typing import Any

from orchestrator.core.json_codec import loads

__all__ = ["SpillFile", "SpillRef"]


class SpillRef(int):
    """Where one trial's rows are: ``count`` rows in ``length`` bytes at ``offset``.

    One int (the three packed): every finished trial keeps two for the whole experiment
    (its rows', its tombstone's), and an object of three ints was some 110 bytes each,
    this some 40 (issue 36). Immutable, compared and hashed by its three fields."""

    __slots__ = ()

    def __new__(cls, offset: int, length: int, count: int) -> SpillRef:
        if not (0 <= length < _FIELD and 0 <= count < _FIELD and offset >= 0):
            raise ValueError(f"a spill reference out of range: {offset}, {length}, {count}")
        return super().__new__(cls, (offset << 64) | (length << 32) | count)

    @property
    def offset(self) -> int:
        return int(self) >> 64

    @property
    def length(self) -> int:
        return (int(self) >> 32) & _MASK

    @property
    def count(self) -> int:
        return int(self) & _MASK

    def __repr__(self) -> str:
        return f"SpillRef(offset={self.offset}, length={self.length}, count={self.count})"

    def __reduce__(self) -> tuple[type[SpillRef], tuple[int, int, int]]:
        return (SpillRef, (self.offset, self.length, self.count))


_FIELD = 1 << 32  # a length or a count: under 4 GiB, under 4 billion rows
_MASK = _FIELD - 1


class SpillFile:
    """An append-only file of row blocks (see the module docstring)."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="trialflow-spill-")
        self._end = 0
        self._lock = threading.Lock()

    def put(self, rows: list[str]) -> SpillRef:
        """Append ``rows`` (JSON texts without newlines); call :meth:`flush` before
        reading them."""
        data = "\n".join(rows).encode()
        ref = SpillRef(self._end, len(data), len(rows))
        with self._lock:
            self._file.write(data)
        self._end += len(data)
        return ref

    def put_blob(self, data: bytes) -> SpillRef:
        """Append ``data`` (a sealed trial's parts: ``engine/tombstone.py``)."""
        ref = SpillRef(self._end, len(data), 0)
        with self._lock:
            self._file.write(data)
        self._end += len(data)
        return ref

    def get_blob(self, ref: SpillRef) -> bytes:
        """The bytes put at ``ref``."""
        return self._read(ref.offset, ref.length)

    def head_of(self, end: int) -> bytes:
        """The file's first ``end`` bytes, in one read (settled trials' parts of the
        journal's head, for a write's build: ``journal/write_bytes.py``)."""
        return self._read(0, end)

    def flush(self) -> None:
        with self._lock:
            self._file.flush()

    def get(self, ref: SpillRef) -> list[str]:
        """The rows at ``ref``, as they were put."""
        if ref.count == 0:
            return []
        return self._read(ref.offset, ref.length).decode().split("\n")

    def _read(self, offset: int, length: int) -> bytes:
        with self._lock:
            self._file.flush()
        data = os.pread(self._file.fileno(), length, offset)
        if len(data) != length:
            raise OSError(f"the journal's spill file is short at {offset}: {len(data)} bytes")
        return data

    def history(self, key: SpillRef) -> list[dict[str, Any]]:
        """The rows at ``key``, decoded (``SpilledHistory``'s source)."""
        return [loads(row) for row in self.get(key)]
