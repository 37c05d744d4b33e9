"""Line files that can be cut back to a training iteration: ``result.json`` and
``progress.csv`` are both one line per result, and a rollback must remove the lines
after an iteration without rewriting the file.

The index is two ``array('q')`` columns (iteration, end offset): 16 bytes per line, so a
million results cost 16 MB of driver memory per file, and a cut is a binary search and
one ``truncate``. The file stays open in append mode between flushes.
"""

from __future__ import annotations

import bisect
import os
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

__all__ = ["IterationFile", "write_atomic"]


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: a reader sees the old or the new file, whole."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class IterationFile:
    """An append-only file of lines, each tagged with the ``training_iteration`` of its
    result, after an optional header. Iterations must not decrease (a trial's history
    is ordered: the hook turns a repeated iteration into a rollback first)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: BinaryIO | None = None
        self._iterations = array("q")
        self._ends = array("q")
        self._header_end = 0

    def __len__(self) -> int:
        return len(self._iterations)

    def start(self, header: bytes = b"") -> None:
        """Truncate the file to ``header`` and forget every line."""
        self.close()
        self._file = open(self.path, "wb")  # kept open between flushes
        self._file.write(header)
        self._header_end = len(header)
        self._iterations = array("q")
        self._ends = array("q")

    def load(self, header_lines: int, iteration_of: Callable[[bytes], int]) -> bytes:
        """Index the file as it is on disk: its first ``header_lines`` lines are the
        header (returned), each later line is tagged ``iteration_of(line)``. For a
        writer that forgot an ended trial and meets it again (a revived trial): O(file
        size), once per revival. A missing file is an empty one."""
        self.close()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        lines = data.splitlines(keepends=True)
        if lines and not lines[-1].endswith(b"\n"):
            lines.pop()  # a torn last line (a crash mid-write) is no result: cut below
        header = b"".join(lines[:header_lines])
        self._header_end = len(header)
        self._iterations, self._ends = array("q"), array("q")
        end = self._header_end
        for line in lines[header_lines:]:
            end += len(line)
            self._iterations.append(iteration_of(line))
            self._ends.append(end)
        if end != len(data):
            with open(self.path, "r+b") as handle:
                handle.truncate(end)
        return header

    def append(self, lines: Sequence[tuple[int, bytes]]) -> None:
        """Append ``(iteration, line)`` pairs; each ``line`` ends with a newline."""
        end = self._ends[-1] if self._ends else self._header_end
        for iteration, line in lines:
            end += len(line)
            self._iterations.append(iteration)
            self._ends.append(end)
        self._handle().write(b"".join(line for _, line in lines))

    def cut(self, iteration: int) -> bytes:
        """Drop the lines of iterations after ``iteration``; the lines dropped (empty
        when none were), for the caller to keep aside."""
        keep = bisect.bisect_right(self._iterations, iteration)
        if keep == len(self._iterations):
            return b""
        size = self._ends[keep - 1] if keep else self._header_end
        handle = self._handle()
        handle.flush()
        with open(self.path, "rb") as reader:
            reader.seek(size)
            dropped = reader.read(self._ends[-1] - size)
        handle.truncate(size)
        handle.seek(size)  # a file opened "wb" would go on writing at the old end
        del self._iterations[keep:]
        del self._ends[keep:]
        return dropped

    def rewrite(self, header: bytes, extend: bytes) -> None:
        """Replace the header and insert ``extend`` before each line's final newline
        (new trailing CSV cells), in one atomic rewrite: O(file size)."""
        self.flush()
        data = self.path.read_bytes() if self.path.exists() else b""
        parts = [header]
        ends = array("q")
        start, end = self._header_end, len(header)
        for line_end in self._ends:
            line = data[start:line_end]
            start = line_end
            parts.append(line[:-1] + extend + line[-1:])
            end += len(line) + len(extend)
            ends.append(end)
        self.close()
        write_atomic(self.path, b"".join(parts))
        self._header_end = len(header)
        self._ends = ends

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _handle(self) -> BinaryIO:
        if self._file is None:
            self._file = open(self.path, "ab")  # kept open between flushes
        return self._file
