"""The ``csv`` logger: ``progress.csv``, one row per result, Ray Tune style.

Columns are the union of the (flattened, ``/``-joined) keys, in the order they first
appeared. A key that first appears after rows were written widens the file: it is
rewritten once with the longer header and an empty cell in the new columns of the
older rows (O(file size), at most once per flush that brings new keys; keys are never
dropped, not even by a rollback that removes every row that had them).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.core.trial_logs import PROGRESS_FILE
from orchestrator.views.loggers.files import IterationFile
from orchestrator.views.loggers.ops import TRAINING_ITERATION
from orchestrator.views.loggers.values import flatten

__all__ = ["CsvWriter", "PROGRESS_FILE"]


class _Lines:
    """A file-like target for ``csv.writer`` that keeps each row's text apart."""

    def __init__(self) -> None:
        self.rows: list[str] = []

    def write(self, text: str) -> int:
        self.rows.append(text)
        return len(text)


def _encode(cells: Iterable[Any]) -> bytes:
    lines = _Lines()
    csv.writer(lines, lineterminator="\n").writerow(cells)
    return "".join(lines.rows).encode("utf-8")


class CsvWriter:
    """Writes ``progress.csv`` in the trial's directory (see the module docstring)."""

    def __init__(self, directory: Path, touched: Callable[[str], None]) -> None:
        self._touched = touched
        self._file = IterationFile(directory / PROGRESS_FILE)
        self._fields: list[str] = []
        self._known: set[str] = set()

    def reset(self, config: Mapping[str, Any]) -> None:
        self._fields, self._known = [], set()
        self._file.start()
        self._touched(PROGRESS_FILE)

    def reopen(self) -> None:
        """Carry on with ``progress.csv`` as it is on disk: its columns from its header,
        its rows indexed by their ``training_iteration`` cell (a trial forgotten when it
        ended came back)."""
        column = 0

        def iteration_of(line: bytes) -> int:
            return int(float(next(csv.reader([line.decode("utf-8")]))[column]))

        path = self._file.path
        first = b""
        if path.exists():
            with open(path, "rb") as handle:
                first = handle.readline()
        self._fields = next(csv.reader([first.decode("utf-8")]), []) if first else []
        self._known = set(self._fields)
        if TRAINING_ITERATION in self._fields:
            column = self._fields.index(TRAINING_ITERATION)
        self._file.load(1 if first else 0, iteration_of)

    def write(self, results: Sequence[Mapping[str, Any]]) -> None:
        flats = [flatten(r) for r in results]
        new: list[str] = []
        for flat in flats:
            for key in flat:
                if key not in self._known:
                    self._known.add(key)
                    new.append(key)
        if new:
            widened = bool(self._fields)
            self._fields.extend(new)
            header = _encode(self._fields)
            if widened:
                self._file.rewrite(header, b"," * len(new))
            else:
                self._file.start(header)
        writer = _Lines()
        rows = csv.writer(writer, lineterminator="\n")
        fields = self._fields
        for flat in flats:
            rows.writerow([flat.get(name, "") for name in fields])
        self._file.append(
            [
                (r[TRAINING_ITERATION], text.encode("utf-8"))
                for r, text in zip(results, writer.rows, strict=True)
            ]
        )
        self._touched(PROGRESS_FILE)

    def rollback(self, iteration: int) -> None:
        if self._file.cut(iteration):
            self._touched(PROGRESS_FILE)

    def config_changed(self, iteration: int, config: Mapping[str, Any]) -> None:
        pass

    def end(self, config: Mapping[str, Any], last_result: Mapping[str, Any] | None) -> None:
        self._file.close()

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()
