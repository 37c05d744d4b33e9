"""What is wrong with a damaged journal, in words, and how much of it survives.

A journal's objects are written atomically, so a damaged one was damaged outside the
writer: a copy cut short, a disk that lost data, a hand edit. Reading one must then
say which object is damaged and how (truncated at byte N, not JSON, a field missing),
and the way on (``python -m orchestrator repair``), instead of a bare
``JSONDecodeError`` from somewhere inside a resume. This module holds those checks and
the tolerant reading that ``repair`` builds on; it is plain data in, plain data out.

The head is written as ``{header fields..., "sealed": [...], "segments": [...], "trials":
[entry, ...]}`` with the trials last, so a truncated head still holds its header and
every trial entry before the cut: :func:`salvage_head` reads those. A sealed object
(format 3) is checked against the byte count and SHA-256 the head lists for it, so a
torn or short one is named, never read short (:func:`damage_of_sealed`); its whole lines
are what :func:`salvage_sealed` reads.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.core.journal_format import FORMAT_VERSION, SEALED_PREFIX
from orchestrator.core.json_codec import loads
from orchestrator.errors import JournalDamaged, JournalError

__all__ = [
    "check_entry",
    "damage_of",
    "damage_of_sealed",
    "damage_of_segment",
    "discontinuity",
    "parse_head",
    "parse_sealed",
    "parse_segment",
    "repair_command",
    "salvage_head",
    "salvage_sealed",
    "salvage_segment",
    "sealed_list",
]

#: The fields every journaled trial entry has, beyond its spec.
ENTRY_FIELDS = ("id", "state", "checkpoints")
#: The spec fields a trial cannot be rebuilt without (``TrialSpec.from_json``).
SPEC_FIELDS = ("resources", "checkpoint_every", "max_failures")
CHECKPOINT_FIELDS = ("trial_id", "iteration", "key", "uri")

_DECODER = json.JSONDecoder()
#: What may be left after a decoding error when the text was cut inside a number or a
#: literal (``tr``, ``nul``, ``12.``), or nothing.
_PARTIAL_TOKEN = re.compile(r"[\w.+-]*")


def repair_command(experiment_uri: str) -> str:
    """The command that repairs the experiment at ``experiment_uri``."""
    import shlex

    base, _, name = experiment_uri.rstrip("/").rpartition("/")
    return (
        f"python -m orchestrator repair --storage {shlex.quote(base or '/')} "
        f"--name {shlex.quote(name)}"
    )


def damaged(experiment_uri: str, where: str, what: str) -> JournalDamaged:
    """The error for a damaged journal object: which, how, and the ways on."""
    return JournalDamaged(
        f"the journal of the experiment at {experiment_uri} is damaged: {where} {what}. "
        f"Recover what survives with `{repair_command(experiment_uri)}` (add "
        "--storage-option for the storage's options): it restores the head's backup, or "
        "rebuilds the journal from the result segments and checkpoints; or start over "
        "with overwrite=True",
        uri=experiment_uri,
        where=where,
        what=what,
    )


def damage_of(data: bytes) -> str | None:
    """What is wrong with ``data`` as one JSON document, in words; None when it parses."""
    if not data.strip():
        return f"is empty ({len(data)} bytes)"
    if not data.strip(b"\0"):  # a disk that lost the blocks: the length survived
        return f"is all zero bytes ({len(data)} bytes): its contents are lost"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"is not text: byte {err.start} of {len(data)} is not UTF-8"
    try:
        json.loads(text)
    except json.JSONDecodeError as err:
        # A string left open runs to the end (the decoder looks for its closing quote
        # there); a literal or number cut short fails at its start or inside it; any
        # other value cut short fails at the end.
        rest = text.rstrip()[err.pos :]
        partial = err.msg != "Extra data" and _PARTIAL_TOKEN.fullmatch(rest) is not None
        if err.msg.startswith("Unterminated string") or partial:
            return (
                f"is truncated: it ends after {len(data)} bytes, in the middle of its JSON document"
            )
        return f"is not JSON at byte {err.pos} of {len(data)} ({err.msg})"
    return None


def parse_head(data: bytes, where: str, experiment_uri: str) -> dict[str, Any]:
    """The head ``data`` parsed and checked; :class:`JournalDamaged` naming what is
    wrong otherwise."""
    what = damage_of(data)
    if what is not None:
        raise damaged(experiment_uri, where, what)
    doc = loads(data)
    if not isinstance(doc, dict):
        raise damaged(experiment_uri, where, f"is not a journal head (a JSON {type(doc).__name__})")
    trials = doc.get("trials")
    if not isinstance(trials, list):
        raise damaged(experiment_uri, where, "is not a journal head: it has no 'trials' list")
    segments = doc.get("segments", [])
    if not isinstance(segments, list) or not all(isinstance(k, str) for k in segments):
        raise damaged(experiment_uri, where, "has a 'segments' field that is not a list of keys")
    version = doc.get("format", 1)
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise JournalError(
            f"the journal {where} has format {version}, written by a newer orchestrator "
            f"(this one reads formats up to {FORMAT_VERSION}); resume or inspect it with "
            "that version (upgrade this one), or start over with overwrite=True"
        )
    if sealed_list(doc) is None:
        raise damaged(
            experiment_uri,
            where,
            f"has a 'sealed' field that is not a list of {SEALED_PREFIX}/ objects "
            "with their 'bytes' and 'sha256'",
        )
    for index, entry in enumerate(trials):
        problem = check_entry(entry)
        if problem is not None:
            raise damaged(experiment_uri, where, f"has a damaged trial entry (#{index}): {problem}")
    return doc


def sealed_list(doc: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The sealed objects a head lists (``[]``: none, as in every head before format
    3); None when its ``sealed`` field is damaged."""
    listed = doc.get("sealed", [])
    if not isinstance(listed, list):
        return None
    for item in listed:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("key"), str)
            and item["key"].startswith(SEALED_PREFIX + "/")
            and isinstance(item.get("bytes"), int)
            and isinstance(item.get("sha256"), str)
        ):
            return None
    return listed


def damage_of_sealed(data: bytes, listed: Mapping[str, Any] | None) -> str | None:
    """What is wrong with a sealed object, in words (None: it reads whole). ``listed``:
    what the head says of it (its bytes and SHA-256), None when no head does."""
    if listed is not None:
        size = listed["bytes"]
        if len(data) < size:
            return f"is truncated: it holds {len(data)} of the {size} bytes the head lists"
        if len(data) != size or hashlib.sha256(data).hexdigest() != listed["sha256"]:
            return (
                f"does not match the head ({len(data)} bytes, the head lists {size} and "
                "a SHA-256 it does not have): its contents were altered or torn"
            )
    return _sealed_lines(data)[1]


def parse_sealed(
    data: bytes, where: str, experiment_uri: str, listed: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """A sealed object's records (``{"entry", "rows"}``), checked against the head's
    word for it; :class:`JournalDamaged` naming the object otherwise."""
    problem = damage_of_sealed(data, listed)
    if problem is not None:
        raise damaged(experiment_uri, where, problem)
    return _sealed_lines(data)[0]


def salvage_sealed(data: bytes) -> list[dict[str, Any]]:
    """The whole records of a damaged sealed object (each a line of its own)."""
    return _sealed_lines(data, tolerant=True)[0]


def _sealed_lines(
    data: bytes, *, tolerant: bool = False
) -> tuple[list[dict[str, Any]], str | None]:
    records: list[dict[str, Any]] = []
    if data and not data.strip(b"\0"):
        return records, f"is all zero bytes ({len(data)} bytes): its contents are lost"
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            record = loads(line)
        except ValueError:
            record = None
        problem = (
            "not JSON"
            if not isinstance(record, dict)
            else "no 'rows' list"
            if not isinstance(record.get("rows"), list)
            else check_entry(record.get("entry"))
        )
        if problem is None:
            records.append(record)  # type: ignore[arg-type]
        elif not tolerant:
            return records, f"has a damaged record on line {number}: {problem}"
    return records, None


def check_entry(entry: Any) -> str | None:
    """What a trial entry lacks, in words; None when it is whole."""
    if not isinstance(entry, Mapping):
        return f"a JSON {type(entry).__name__}, not an object"
    name = f"trial {entry.get('id')!r}" if isinstance(entry.get("id"), str) else "it"
    missing = [f for f in ENTRY_FIELDS if f not in entry]
    if not entry.get("spec_lost"):
        missing += [f for f in SPEC_FIELDS if f not in entry]
    if missing:
        return f"{name} has no {', '.join(repr(f) for f in missing)}"
    if not isinstance(entry["id"], str) or not entry["id"]:
        return f"its 'id' is {entry['id']!r}, not a trial id"
    if not isinstance(entry["checkpoints"], list):
        return f"{name}'s 'checkpoints' is not a list"
    for ckpt in entry["checkpoints"]:
        if not isinstance(ckpt, Mapping) or any(f not in ckpt for f in CHECKPOINT_FIELDS):
            return f"{name} has a checkpoint record without {', '.join(CHECKPOINT_FIELDS)}"
    return None


def parse_segment(data: bytes, where: str, experiment_uri: str) -> list[dict[str, Any]]:
    """A result segment's lines, checked; :class:`JournalDamaged` naming the segment
    and the line otherwise."""
    parts, problem = _segment_lines(data)
    if problem is not None:
        raise damaged(experiment_uri, where, problem)
    return parts


def damage_of_segment(data: bytes) -> str | None:
    """What is wrong with a result segment, in words; None when it reads whole."""
    return _segment_lines(data)[1]


def salvage_segment(data: bytes) -> list[dict[str, Any]]:
    """The whole lines of a segment (a truncated last line, or a damaged one, left out)."""
    return _segment_lines(data, tolerant=True)[0]


def _segment_lines(
    data: bytes, *, tolerant: bool = False
) -> tuple[list[dict[str, Any]], str | None]:
    parts: list[dict[str, Any]] = []
    if data and not data.strip(b"\0"):
        return parts, f"is all zero bytes ({len(data)} bytes): its contents are lost"
    offset = 0
    for number, line in enumerate(data.split(b"\n"), start=1):
        start, offset = offset, offset + len(line) + 1
        if not line.strip():
            continue
        try:
            part = loads(line)
            ok = (
                isinstance(part, dict)
                and isinstance(part.get("trial"), str)
                and isinstance(part.get("from"), int)
                and isinstance(part.get("rows"), list)
            )
        except ValueError:
            ok, part = False, None
        if ok:
            parts.append(part)
            continue
        if tolerant:
            continue
        if part is None and offset > len(data) and line.startswith(b'{"trial":'):
            return parts, f"is truncated: line {number} ends after {len(data)} bytes, cut short"
        return parts, (
            f"has a damaged line {number} (at byte {start}): not a "
            '{"trial", "from", "rows"} record'
        )
    return parts, None


def discontinuity(
    head: Mapping[str, Any],
    segments: Sequence[tuple[str, Sequence[Mapping[str, Any]]]],
    sealed: Mapping[str, Any] | None = None,
) -> tuple[str, str] | None:
    """Where a head's segments (each ``(where, parsed lines)``, in the head's order) stop
    adding up, and how, in words; None when they do.

    A segment cut just after a newline, or one that lost a whole line, still parses:
    every line left is whole. Only the arithmetic shows the loss. The writer stores each
    trial's new rows from where its last line ended, so a line that starts past the rows
    before it, or a head that counts more rows than the lines hold, means lines are
    gone; replaying them anyway would move a trial's later results into the places of
    the lost ones. A trial whose entry is sealed (in ``sealed``) has its rows in its
    object: its older lines are not counted.
    """
    have: dict[str, int] = {}
    for where, parts in segments:
        for part in parts:
            trial, start = part["trial"], part["from"]
            if sealed and trial in sealed:
                continue
            if start > have.get(trial, 0):
                return where, (
                    f"continues trial {trial}'s results from #{start + 1}, but the segments "
                    f"before it hold {have.get(trial, 0)}: lines of theirs are lost"
                )
            have[trial] = start + len(part["rows"])
    for entry in head.get("trials") or []:
        count = entry.get("results_count")
        held = have.get(entry["id"], 0)
        if isinstance(count, int) and count > held:
            where = segments[-1][0] if segments else "the head"
            return where, (
                f"is the last of the segments that hold {held} result(s) of trial "
                f"{entry['id']}, where the head counts {count}: lines of theirs are lost"
            )
    return None


def salvage_head(data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What a damaged head still holds: its header fields (those before the cut) and
    every whole trial entry before the cut. ``({}, [])`` when nothing parses."""
    text = data.decode("utf-8", errors="replace")
    header: dict[str, Any] = {}
    entries: list[dict[str, Any]] = []
    pos = _skip(text, 0)
    if not text.startswith("{", pos):
        return header, entries
    pos += 1
    while True:
        pos = _skip(text, pos)
        try:
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _skip(text, pos)
            if not isinstance(key, str) or not text.startswith(":", pos):
                break
            pos = _skip(text, pos + 1)
            if key == "trials" and text.startswith("[", pos):
                entries = _salvage_entries(text, pos + 1)
                break
            value, pos = _DECODER.raw_decode(text, pos)
        except ValueError:
            break
        pos = _skip(text, pos)
        if not text.startswith((",", "}"), pos):  # a number cut short still parses
            break
        header[key] = value
        if not text.startswith(",", pos):
            break
        pos += 1
    return header, entries


def _salvage_entries(text: str, pos: int) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    while True:
        pos = _skip(text, pos)
        try:
            entry, pos = _DECODER.raw_decode(text, pos)
        except ValueError:
            return entries
        if check_entry(entry) is None:
            entries.append(entry)
        pos = _skip(text, pos)
        if not text.startswith(",", pos):
            return entries
        pos += 1


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos
