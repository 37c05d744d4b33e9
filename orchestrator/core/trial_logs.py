"""The per-trial logs as a second record of a trial's results: where they lie, the
rows they hold, and the rules a resumed experiment follows when they hold rows its
journal does not (sans-IO; the reading and writing is :mod:`orchestrator.journal.trial_logs`).

The loggers (:mod:`orchestrator.views.loggers`) write ``<trial dir>/result.json`` (one
JSON object per result) and ``progress.csv`` (one row per result), and a resumed
logger rewrites both from the trial's history. Before it does, two rules keep every
row that exists:

* rows the journal lost (a damaged segment dropped by ``repair``) are real history:
  a row of ``result.json`` whose iteration the journal lacks and that is not after
  the newest iteration the journal vouches for (its head's iteration, a checkpoint's,
  its last result's) goes back into the trial's results (:func:`lost_rows`);
* rows the resumed trial abandons (after the checkpoint it restarts from, or that no
  journal write ever saw) are an abandoned run's: the file is kept aside whole, as
  ``<name>.kept-<UTC time>``, and named (:func:`abandoned`).

A rollback during a run (a restore to an older checkpoint, a PBT exploit) cuts the logs
in place, as the journal cuts the history; the lines it takes out of ``result.json``
are appended to ``result.abandoned.json`` beside it, so no log line is ever deleted
(``progress.csv``, a flattened view of the same rows, is cut; TensorBoard hides the
abandoned points with a purge record, and its files keep them).
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "ABANDONED_FILE",
    "LINE_LOGS",
    "PARAMS_HISTORY_FILE",
    "PROGRESS_FILE",
    "RESULT_FILE",
    "abandoned",
    "csv_iterations",
    "kept_name",
    "log_key",
    "logged_iterations",
    "lost_rows",
    "result_rows",
    "rewritten_holds",
    "spans",
    "trial_dirname",
    "with_rows",
]

RESULT_FILE = "result.json"
#: One line ``{"iteration": k, "config": ...}`` per config the trial ran with.
PARAMS_HISTORY_FILE = "params_history.jsonl"
#: The lines a rollback during a run takes out of ``result.json``, appended here.
ABANDONED_FILE = "result.abandoned.json"
PROGRESS_FILE = "progress.csv"
#: The line logs a resumed logger rewrites: from the history (one line per result), or
#: afresh with the trial's current config (``params_history.jsonl``: its one line is at
#: iteration 0, so a line at a later one would be lost).
LINE_LOGS = (RESULT_FILE, PROGRESS_FILE, PARAMS_HISTORY_FILE)
_ITERATION = "training_iteration"
#: How the loggers spell non-finite floats (``views/loggers/values.py``), read back.
_NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def trial_dirname(trial_id: str) -> str:
    """The directory (and upload key prefix) of a trial: its id, with path separators
    replaced so an id can never name a place outside the log directory."""
    name = "".join("_" if c in "/\\\0" else c for c in trial_id)
    return name if name not in ("", ".", "..") else f"_{name}_"


def log_key(trial_id: str, name: str) -> str:
    """The storage key of a trial's log ``name``, relative to the experiment."""
    return f"{trial_dirname(trial_id)}/{name}"


def kept_name(name: str, now: float) -> str:
    """The name a log is kept aside under: ``result.json.kept-20260105T101500Z``."""
    return f"{name}.kept-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now))}"


def result_rows(data: bytes) -> list[dict[str, Any]]:
    """The results a ``result.json`` holds, in its order: each line that parses as an
    object with an int ``training_iteration`` (a line cut by a crash is skipped), its
    ``"NaN"``/``"Infinity"``/``"-Infinity"`` strings read back as the floats."""
    found = []
    for line in data.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and type(row.get(_ITERATION)) is int:
            found.append(_floats(row))
    return found


def csv_iterations(data: bytes) -> list[int]:
    """The ``training_iteration`` of each whole row of a ``progress.csv``."""
    try:
        reader = csv.reader(io.StringIO(data.decode("utf-8", errors="replace")))
        header = next(reader, [])
        column = header.index(_ITERATION)
    except (ValueError, csv.Error):
        return []
    found = []
    for row in reader:
        try:
            if len(row) == len(header):
                found.append(int(row[column]))
        except ValueError:
            continue
    return found


def logged_iterations(name: str, data: bytes) -> list[int]:
    """The iterations the log ``name`` holds (``params_history.jsonl``: the iteration
    each config took effect after)."""
    if name == PROGRESS_FILE:
        return csv_iterations(data)
    if name == PARAMS_HISTORY_FILE:
        found = []
        for line in data.splitlines():
            try:
                value = json.loads(line).get("iteration")
            except (ValueError, AttributeError):
                continue
            if type(value) is int:
                found.append(value)
        return found
    return [row[_ITERATION] for row in result_rows(data)]


def rewritten_holds(name: str, history: Iterable[int]) -> set[int]:
    """The iterations the log ``name`` holds once a resumed logger rewrote it for a
    trial whose history holds ``history``."""
    return {0} if name == PARAMS_HISTORY_FILE else set(history)


def lost_rows(
    results: Sequence[Mapping[str, Any]], logged: Iterable[dict[str, Any]], bound: int
) -> list[dict[str, Any]]:
    """The logged rows the journal lost: an iteration ``results`` lacks, at most
    ``bound`` (the newest the journal vouches for; later rows were never journaled and
    are the resumed trial's to run again). The last row of an iteration wins (a log
    cut by a rollback holds each iteration once)."""
    known = {r.get(_ITERATION) for r in results}
    lost: dict[int, dict[str, Any]] = {}
    for row in logged:
        iteration = row[_ITERATION]
        if iteration <= bound and iteration not in known:
            lost[iteration] = row
    return [lost[i] for i in sorted(lost)]


def with_rows(
    results: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``results`` with ``rows`` put in their places, by iteration."""
    merged = [dict(r) for r in results] + [dict(r) for r in rows]
    merged.sort(key=lambda r: r[_ITERATION])  # stable: a history's order is its iterations'
    return merged


def abandoned(logged: Iterable[int], kept: Iterable[int]) -> list[int]:
    """The iterations a log holds that the resumed history does not: rewriting the log
    from the history would lose them, so the log is kept aside first."""
    return sorted(set(logged) - set(kept))


def spans(iterations: Iterable[int]) -> str:
    """``1-83, 90`` for 1..83 and 90: iterations as people read them."""
    ordered = sorted(set(iterations))
    parts: list[str] = []
    start = previous = None
    for i in [*ordered, None]:
        if i is not None and previous is not None and i == previous + 1:
            previous = i
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = i
    return ", ".join(parts)


def _floats(value: Any) -> Any:
    if isinstance(value, str):
        return _NON_FINITE.get(value, value)
    if isinstance(value, dict):
        return {k: _floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_floats(v) for v in value]
    return value
