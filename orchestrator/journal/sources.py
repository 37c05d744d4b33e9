"""Where a damaged experiment's results may still be, read tolerantly: for ``repair``.

A result is written to several places: the journal's result segments (and, as its
last result and its checkpoints' metrics, the journal's head and backup), and the
per-trial logs (``<trial>/result.json``, one JSON object per line, and
``<trial>/progress.csv``, flattened). Any of them may be damaged or gone; what one lost,
another may hold. This module reads each, whole lines only, and says what is wrong
with each damaged object; :mod:`orchestrator.journal.repair` merges them.

Segments are replayed by *position*, as the journal does, but a line that starts past
the trial's results so far (its earlier rows were in a segment that is damaged or
gone) leaves a *hole* there instead of closing up: the rows after a hole keep their
place, and the hole says how many results are missing and between which iterations,
which is what the other sources are asked for.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.core.json_codec import loads
from orchestrator.journal.damage import damage_of_segment, salvage_segment

__all__ = [
    "CSV_LOG",
    "JSON_LOG",
    "Damaged",
    "log_dirname",
    "read_csv_log",
    "read_json_log",
    "replay_with_holes",
    "segment_damage",
]

#: The per-trial logs' names (the loggers' ``RESULT_FILE`` and ``PROGRESS_FILE``:
#: ``tests/test_repair_matrix.py`` checks they agree; the journal sits below the loggers).
JSON_LOG = "result.json"
CSV_LOG = "progress.csv"
ITERATION = "training_iteration"
#: What a segment's line cut short still says: whose results it held, from where.
_PARTIAL_LINE = re.compile(rb'\{"trial":("(?:[^"\\]|\\.)*"),"from":(\d+)')


@dataclass(frozen=True)
class Damaged:
    """One damaged (or missing) object: where, what is wrong, and what it held (in
    words: counts per trial, as far as it can still be read)."""

    where: str
    what: str
    held: str = ""

    def line(self) -> str:
        return f"damaged: {self.where} {self.what}" + (f"; {self.held}" if self.held else "")


def log_dirname(trial_id: str) -> str:
    """A trial's log directory (the loggers' ``trial_dirname``)."""
    name = "".join("_" if c in "/\\\0" else c for c in trial_id)
    return name if name not in ("", ".", "..") else f"_{name}_"


def iteration_of(row: Any) -> int | None:
    value = row.get(ITERATION) if isinstance(row, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def replay_with_holes(parts: Iterable[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Every trial's results by position; ``None`` where a position's row is lost."""
    results: dict[str, list[Any]] = {}
    for part in parts:
        rows = results.setdefault(part["trial"], [])
        start = part["from"]
        if start > len(rows):
            rows.extend([None] * (start - len(rows)))
        del rows[start:]
        rows.extend(part["rows"])
    return results


def segment_damage(data: bytes | None) -> tuple[str, str] | None:
    """What is wrong with a segment and what it still held, in words; None if whole."""
    if data is None:
        return "is missing", ""
    what = damage_of_segment(data)
    if what is None:
        return None
    kept: dict[str, int] = {}
    for part in salvage_segment(data):
        kept[part["trial"]] = kept.get(part["trial"], 0) + len(part["rows"])
    held = [f"trial {t}: {n} result(s) read" for t, n in kept.items()]
    whole = {json.dumps(t) for t in kept}
    for match in _PARTIAL_LINE.finditer(data):
        name = match[1].decode("utf-8", "replace")
        if name not in whole:
            trial = json.loads(name) if _is_json(name) else name
            held.append(f"trial {trial}: results from #{int(match[2]) + 1} on cut off")
    if not held and data.strip(b"\0 \n"):
        held.append("no trial's results readable")
    return what, "; ".join(held) if held else "nothing readable"


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def read_json_log(data: bytes) -> tuple[dict[int, dict[str, Any]], str | None]:
    """``result.json``'s results by iteration (whole lines only), and what is wrong with
    it in words (None when every line reads)."""
    rows: dict[int, dict[str, Any]] = {}
    bad: list[int] = []
    lines = data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = loads(line)
        except ValueError:
            row = None
        iteration = iteration_of(row)
        if iteration is None:
            bad.append(number)
            continue
        rows[iteration] = row
    if not bad:
        return rows, None
    if bad == [len(lines)] and data and not data.endswith(b"\n"):
        return rows, f"is truncated: its last line (line {bad[0]}) is cut short"
    shown = ", ".join(str(n) for n in bad[:5]) + (" ..." if len(bad) > 5 else "")
    return rows, f"has {len(bad)} line(s) that are not results ({shown})"


def read_csv_log(data: bytes) -> tuple[dict[int, dict[str, Any]], str | None]:
    """``progress.csv``'s results by iteration, nested again from their flattened
    columns, each cell read back as the number or bool it was written from where it
    reads as one (the CSV lost the types: this is the source of last resort)."""
    try:
        text = data.decode("utf-8")
        table = list(csv.reader(io.StringIO(text)))
    except (UnicodeDecodeError, csv.Error) as err:
        return {}, f"is not a CSV file ({err})"
    if not table or ITERATION not in table[0]:
        return {}, f"has no {ITERATION!r} column" if data.strip() else "is empty"
    header, rows, bad = table[0], {}, []
    for number, cells in enumerate(table[1:], start=2):
        if len(cells) != len(header):
            bad.append(number)
            continue
        row: dict[str, Any] = {}
        for key, cell in zip(header, cells, strict=True):
            if cell != "":
                _put(row, key.split("/"), _cell(cell))
        iteration = iteration_of(row)
        if iteration is None:
            bad.append(number)
            continue
        rows[iteration] = row
    if bad:
        return rows, f"has {len(bad)} row(s) that are not results (lines {bad[:5]})"
    return rows, None


def _cell(text: str) -> Any:
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _put(row: dict[str, Any], path: list[str], value: Any) -> None:
    for name in path[:-1]:
        inner = row.setdefault(name, {})
        if not isinstance(inner, dict):
            return
        row = inner
    row[path[-1]] = value
