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

from orchestrator.core.journal_format import SEGMENTS_PREFIX
from orchestrator.core.json_codec import loads
from orchestrator.core.trial_logs import PROGRESS_FILE, RESULT_FILE
from orchestrator.core.trial_logs import trial_dirname as log_dirname
from orchestrator.journal.damage import damage_of_segment, salvage_segment

__all__ = [
    "CSV_LOG",
    "JSON_LOG",
    "Damaged",
    "checkpoint_metrics",
    "gaps",
    "log_dirname",
    "log_dirs",
    "log_sources",
    "read_csv_log",
    "read_json_log",
    "replay_with_holes",
    "segment_damage",
    "segment_rows",
]

#: The per-trial logs' names: the loggers' own (``core/trial_logs.py``).
JSON_LOG = RESULT_FILE
CSV_LOG = PROGRESS_FILE
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


def zeroed(data: bytes) -> str | None:
    """Words for an object whose bytes are all zero (a disk that lost its blocks), or
    None."""
    if data and not data.strip(b"\0"):
        return f"is all zero bytes ({len(data)} bytes): its contents are lost"
    return None


def read_json_log(data: bytes) -> tuple[dict[int, dict[str, Any]], str | None]:
    """``result.json``'s results by iteration (whole lines only), and what is wrong with
    it in words (None when every line reads)."""
    if zeroed(data):
        return {}, zeroed(data)
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
    if zeroed(data):
        return {}, zeroed(data)
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


# -- reading each source from storage -----------------------------------------------


async def segment_rows(
    store: Any,
    header: Mapping[str, Any],
    keys: list[str],
    damaged: list[Damaged],
    counts: Mapping[str, int] | None = None,
) -> tuple[dict[str, list[Any]], int]:
    """Every trial's results by position from every segment that survives (oldest
    first, whole lines only; a hole where rows are lost), and how many segments were
    read, of ``keys`` (every key the experiment holds). Each damaged or missing segment
    is added to ``damaged``, with what it held: the rows still read from it, and each
    hole that only it can have held. ``counts`` (a trial's results as a head counted
    them) shows the holes at a trial's end.

    A segment cut just after a newline reads whole; a hole after its lines (or past its
    end, by ``counts``) with no damaged segment that can have held it names it."""
    present = sorted(k for k in keys if k.startswith(SEGMENTS_PREFIX + "/"))
    listed = header.get("segments")
    missing = {k for k in listed if isinstance(k, str)} if isinstance(listed, list) else set()
    missing = (missing | set(gaps(present))) - set(present)
    slots = sorted(set(present) | missing)
    problems: dict[str, tuple[str, str]] = {}
    parts_of: dict[str, list[dict[str, Any]]] = {}
    for key in present:
        try:
            data: bytes | None = await store.read_bytes(key)
        except Exception:
            data = None
        problem = segment_damage(data)
        if problem is not None:
            problems[key] = problem
        parts_of[key] = salvage_segment(data) if data is not None else []
    for key in missing:
        why = (
            "the head lists it" if key not in gaps(present) else "the segments around it are there"
        )
        problems[key] = (f"is missing ({why})", "")
    lost_in: dict[str, list[str]] = {key: [] for key in problems}
    before: list[str] = []  # holes no surviving or named segment can have held

    # A driver's first segment (``-000000``) is a base: a line from #1 for every trial.
    # Before one, nothing is missing; before any other, a segment gone may have been.
    based = bool(slots) and slots[0].endswith("-000000.jsonl")

    def blame(between: list[str], trial: str, first: int, last: int) -> bool:
        """Name the segments that can have held a trial's results #first-last: the
        damaged ones among ``between``, else those that read whole (one cut at a line's
        end) unless a segment gone before them all may have held them; False when none
        is named."""
        suspects = [k for k in between if k in problems]
        if not suspects and (trial in seen or based):
            suspects = [k for k in between if k in parts_of]
        for k in suspects:
            if k not in problems:
                problems[k] = (CUT_AT_A_LINE, "")
                lost_in[k] = []
            alone = "with it" if len(suspects) == 1 else "with it or another one"
            lost_in[k].append(f"trial {trial}: results #{first}-{last} gone {alone}")
        return bool(suspects)

    seen: dict[str, int] = {}  # trial -> the slot of its last line
    lengths: dict[str, int] = {}
    parts = []
    for index, key in enumerate(slots):
        for part in parts_of.get(key, []):
            trial, start = part["trial"], part["from"]
            have = lengths.get(trial, 0)
            between = slots[seen.get(trial, -1) + 1 : index]
            if start > have and not blame(between, trial, have + 1, start):
                before.append(f"trial {trial}: results #{have + 1}-{start}")
            lengths[trial] = start + len(part["rows"])
            seen[trial] = index
            parts.append(part)
    for trial, count in (counts or {}).items():
        have = lengths.get(trial, 0)
        if count > have:
            blame(slots[seen.get(trial, -1) + 1 :], trial, have + 1, count)
    for key in slots:
        if key in problems:
            what, held = problems[key]
            held = "; ".join(x for x in [held, *lost_in[key]] if x)
            damaged.append(Damaged(store.uri_for(key), what, held))
    # Every trial's first line in the journal starts at its first result (a base, or
    # the first write after it was added): one that starts later with no damaged
    # segment before it lost one that is gone with every head that listed it.
    if before and present:
        damaged.append(
            Damaged(
                f"the segment(s) before {store.uri_for(present[0])}",
                "are missing (the first surviving lines start past trials' first results)",
                "; ".join(before),
            )
        )
    return replay_with_holes(parts), len(present)


#: A segment that parses whole but lost lines: cut at a line's end, or a line deleted.
CUT_AT_A_LINE = (
    "reads whole, but lines written to it are gone (cut at a line's end, or a line "
    "removed): the lines after it, or the head's count, go past it"
)


def gaps(keys: list[str]) -> list[str]:
    """Segments missing between two that survive: a driver numbers its segments
    (``<token>-<n>``) one after another, and only a compaction deletes them, oldest
    first."""
    numbers: dict[str, list[int]] = {}
    for key in keys:
        token, _, rest = key.rpartition("/")[2].rpartition("-")
        if rest.endswith(".jsonl") and rest[:-6].isdigit():
            numbers.setdefault(token, []).append(int(rest[:-6]))
    missing = []
    for token, found in numbers.items():
        present = set(found)
        for n in range(min(found), max(found)):
            if n not in present:
                missing.append(f"{SEGMENTS_PREFIX}/{token}-{n:06d}.jsonl")
    return missing


def log_dirs(keys: list[str]) -> set[str]:
    logs = ("/" + JSON_LOG, "/" + CSV_LOG)
    return {k.split("/")[0] for k in keys if k.count("/") == 1 and k.endswith(logs)}


async def log_sources(
    store: Any, trial: str, logs: set[str], damaged: list[Damaged]
) -> list[tuple[str, dict[int, dict[str, Any]]]]:
    """``trial``'s ``result.json`` and ``progress.csv`` rows by iteration (empty when
    absent), each damaged one added to ``damaged``."""
    directory = log_dirname(trial)
    sources = []
    for name, read in ((JSON_LOG, read_json_log), (CSV_LOG, read_csv_log)):
        key = f"{directory}/{name}"
        rows: dict[int, dict[str, Any]] = {}
        if directory in logs and await store.exists(key):
            rows, what = read(await store.read_bytes(key))
            if what is not None:
                damaged.append(Damaged(store.uri_for(key), what, f"{len(rows)} result(s) read"))
        sources.append((store.uri_for(key), rows))
    return sources


def checkpoint_metrics(entries: list[dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    """Each trial's results as its journaled checkpoints' records hold them."""
    found: dict[str, dict[int, dict[str, Any]]] = {}
    for entry in entries:
        for ckpt in entry.get("checkpoints") or []:
            metrics = ckpt.get("metrics") if isinstance(ckpt, Mapping) else None
            iteration = ckpt.get("iteration") if isinstance(ckpt, Mapping) else None
            if isinstance(metrics, dict) and metrics and isinstance(iteration, int):
                if metrics.get("training_iteration") == iteration:
                    found.setdefault(entry["id"], {})[iteration] = metrics
    return found
