"""The journal's format, as plain data: the names of its objects, a trial's entry, and
how result segments replay into each trial's history.

:mod:`orchestrator.journal` reads and writes it in storage; :mod:`orchestrator.views`
reads it for people. The format's design is told in :mod:`orchestrator.journal.writer`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.core.checkpoints import Checkpoint
from orchestrator.core.json_codec import loads
from orchestrator.core.lease_record import LEASE_KEY

__all__ = [
    "BACKUP_KEY",
    "FORMAT_VERSION",
    "JOURNAL_KEY",
    "RESERVED_NAMES",
    "SEALED_PREFIX",
    "SEGMENTS_PREFIX",
    "JournaledTrial",
    "merge_sealed",
    "replay_parts",
    "replay_results",
    "spec_fields",
]

JOURNAL_KEY = "experiment_state.json"
SEGMENTS_PREFIX = "experiment_state.results"
#: Sealed objects: settled trials' parts of the head and their results, written once
#: (``<token>-<n>.jsonl``, names never reused) and listed by the heads that follow.
SEALED_PREFIX = "experiment_state.sealed"
#: A copy of the head, written right after it by every write: what ``repair`` restores
#: when the head itself is damaged (see :mod:`orchestrator.journal.repair`).
BACKUP_KEY = "experiment_state.backup.json"
#: Names a trial may not take: the journal's own objects share the experiment's root.
RESERVED_NAMES = frozenset({JOURNAL_KEY, SEGMENTS_PREFIX, SEALED_PREFIX, BACKUP_KEY, LEASE_KEY})
#: 1: one document with every result inline; 2: result segments; 3: sealed objects
#: (``"sealed"`` in the head); 4: a sweep's document counts its trials instead of
#: listing them (:mod:`orchestrator.core.sweep_doc`). Every earlier one is still read;
#: a later one is refused (a format-3 driver would find no trial of a format-4 sweep).
FORMAT_VERSION = 4


@dataclass(frozen=True)
class JournaledTrial:
    """One trial as the journal recorded it, plain data: its spec's journal fields
    (``TrialSpec.from_json`` rebuilds it, loading its code only if asked) and what had
    happened to it."""

    id: str
    spec: dict[str, Any]
    state: str
    iteration: int
    num_failures: int
    error: str | None
    checkpoints: list[Checkpoint]
    results: list[dict[str, Any]]
    events: list[dict[str, Any]]
    config_pickle: str | None  # its config since an exploit (None: the spec's)
    # Where its timeline starts when that is not one of its checkpoints (an exploit's).
    origin: Checkpoint | None = None
    # Every committed checkpoint storage holds under the trial's prefix, listed or not.
    stored_keys: frozenset[str] = frozenset()
    save_failed: bool = False  # a checkpoint could not be stored (what paused it)


#: A head entry's fields that change as the trial runs; the rest is its spec.
_CHANGING = frozenset(
    {
        "id",
        "state",
        "iteration",
        "num_failures",
        "error",
        "checkpoints",
        "origin",
        "last_result",
        "results_count",
        "results",
        "events",
        "config_now",
        "config_now_pickle",
        "save_failed",
        "at",
    }
)


def spec_fields(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A head entry's spec: every field that does not change as the trial runs."""
    return {k: v for k, v in entry.items() if k not in _CHANGING}


def merge_sealed(
    head: Mapping[str, Any], objects: Iterable[Iterable[Mapping[str, Any]]]
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """The head with every trial in its ``trials``, and the results of the trials whose
    entry is a sealed one, from ``objects`` (the records of the sealed objects the head
    lists, in its order: ``{"entry", "rows"}`` each).

    A trial's entry is its live one in the head if it has one (it came back), else the
    one of the last object that holds it (a later object holds it as sealed again); the
    trials are in the order of their entries' ``at``. The head itself is not changed."""
    found: dict[str, tuple[int, dict[str, Any], list[Any] | None]] = {}
    for records in objects:
        for record in records:
            entry = record["entry"]
            found[entry["id"]] = (int(entry.get("at", 0)), entry, record["rows"])
    for entry in head.get("trials") or []:
        found[entry["id"]] = (int(entry.get("at", 0)), entry, None)
    ordered = sorted(found.values(), key=lambda item: item[0])
    doc = {k: v for k, v in head.items() if k != "sealed"}
    doc["trials"] = [entry for _, entry, _ in ordered]
    return doc, {entry["id"]: rows for _, entry, rows in ordered if rows is not None}


def replay_parts(
    head: Mapping[str, Any],
    segments: Iterable[Iterable[Mapping[str, Any]]],
    sealed: Mapping[str, list[Any]] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Every trial's results: inline in a format-1 head, else the parsed lines of
    ``segments`` (the objects the head lists, in its order) replayed and each trial cut
    to the ``results_count`` its head entry records.

    Each segment line ``{"trial", "from", "rows"}`` replaces the trial's results from
    index ``from`` on: that is how a rollback (a restore to an older checkpoint) drops
    the results of the abandoned timeline. A trial whose entry is sealed (``sealed``,
    from :func:`merge_sealed`) has its object's rows: its lines in the segments are
    older (a trial that comes back is written again from its first result).
    """
    trials = head.get("trials") or []
    if int(head.get("format", 1)) < 2:
        return {entry["id"]: list(entry.get("results") or []) for entry in trials}
    sealed = sealed or {}
    results: dict[str, list[dict[str, Any]]] = {
        entry["id"]: list(sealed.get(entry["id"], ())) for entry in trials
    }
    for parts in segments:
        for part in parts:
            if part["trial"] in sealed:
                continue
            rows = results.setdefault(part["trial"], [])
            del rows[part["from"] :]
            rows.extend(part["rows"])
    for entry in trials:
        rows = results[entry["id"]]
        del rows[entry.get("results_count", len(rows)) :]
    return results


def replay_results(
    head: Mapping[str, Any],
    segments: Iterable[bytes],
    sealed: Mapping[str, list[Any]] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """:func:`replay_parts` of the segments' bytes, each line parsed as it comes."""
    return replay_parts(
        head,
        ([loads(line) for line in data.splitlines() if line.strip()] for data in segments),
        sealed,
    )
