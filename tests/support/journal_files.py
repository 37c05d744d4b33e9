"""A local experiment's journal as tests read and edit it (format 3: sealed objects).

A finished trial's entry leaves the head for a sealed object (``journal/sealed.py``), so
a test that reads the head's ``trials`` sees the live trials only; these helpers give
every trial's entry, or rewrite the journal into the same journal with every entry in
the head (its sealed trials' results in one more segment, its objects deleted), for tests
that edit it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.core.journal_format import (
    BACKUP_KEY,
    JOURNAL_KEY,
    SEALED_PREFIX,
    SEGMENTS_PREFIX,
)

__all__ = ["head_trials", "unseal"]


def _merged(experiment: Path) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    head: dict[str, Any] = json.loads((experiment / JOURNAL_KEY).read_text())
    entries: dict[str, dict[str, Any]] = {}
    rows: dict[str, list[Any]] = {}
    for item in head.get("sealed") or []:
        for line in (experiment / item["key"]).read_bytes().splitlines():
            record = json.loads(line)
            entries[record["entry"]["id"]] = record["entry"]
            rows[record["entry"]["id"]] = record["rows"]
    for entry in head["trials"]:
        entries[entry["id"]] = entry
        rows.pop(entry["id"], None)
    head["trials"] = sorted(entries.values(), key=lambda e: e.get("at", 0))
    head["sealed"] = []
    return head, rows


def head_trials(experiment: Path) -> list[dict[str, Any]]:
    """Every trial's entry in the journal of the local ``experiment``, in order."""
    trials: list[dict[str, Any]] = _merged(experiment)[0]["trials"]
    return trials


def unseal(experiment: Path) -> dict[str, Any]:
    """Rewrite the journal of the local ``experiment`` with every trial's entry in the
    head (the sealed trials' results in a segment of their own, listed last); the head."""
    head, rows = _merged(experiment)
    if rows:
        key = f"{SEGMENTS_PREFIX}/ffffffffffff0000-000000.jsonl"
        lines = "".join(
            json.dumps({"trial": trial, "from": 0, "rows": found}) + "\n"
            for trial, found in rows.items()
        )
        (experiment / key).write_text(lines)
        head["segments"] = [*head.get("segments", []), key]
    data = json.dumps(head)
    (experiment / JOURNAL_KEY).write_text(data)
    (experiment / BACKUP_KEY).write_text(data)
    for path in (experiment / SEALED_PREFIX).glob("*"):  # no longer listed: gone
        path.unlink()
    return head
