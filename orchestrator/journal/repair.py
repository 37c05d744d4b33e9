"""Rebuild a damaged journal from what survives (``python -m orchestrator repair``).

A journal whose head cannot be read cannot be resumed, and the experiment's work (its
checkpoints, its results) would be stranded. Repair takes, in this order:

1. nothing, when the journal reads whole (it says so);
2. the head's backup (``experiment_state.backup.json``, written beside the head by
   every journal write), when it and the segments it lists read whole: the journal as
   of its last write, exactly;
3. otherwise a rebuilt journal: the header (sweeps, start time) and every whole trial
   entry still in the head or its backup (a truncated head keeps everything before
   the cut), every trial's results replayed from the result segments that survive (in
   the order they were written), and, for a trial found only in the segments or as
   checkpoints in storage, an entry of what storage shows: its results, its committed
   checkpoints on its timeline, its config from ``params.json``; its spec (trainable,
   stop criterion, options) was only in the head, so it is ERROR until an
   ``add_trial(..., trial_id=...)`` of a resumed experiment supplies one.

The damaged head is kept aside (``experiment_state.damaged-<time>.json``), never
deleted, and so are the old segments (the next journal write's compaction removes the
ones the new head does not list). Repair needs storage only: no Ray, no user code.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from orchestrator.core.journal_format import (
    BACKUP_KEY,
    FORMAT_VERSION,
    JOURNAL_KEY,
    SEGMENTS_PREFIX,
)
from orchestrator.core.json_codec import dumps
from orchestrator.errors import ConfigError, JournalDamaged
from orchestrator.journal.damage import parse_head, parse_segment, salvage_head, salvage_segment
from orchestrator.journal.reader import load_experiment
from orchestrator.journal.writer import segment_token

__all__ = ["RepairReport", "repair_experiment"]

#: A checkpoint key's last part: ``checkpoint_<iteration>`` and, for an iteration a
#: rolled-back run saved again, ``.<n>``.
CHECKPOINT_NAME = re.compile(r"^checkpoint_(\d+)(?:\.(\d+))?$")
#: The error a trial rebuilt without its spec carries (and ``show`` prints).
SPEC_LOST_ERROR = (
    "rebuilt by repair: its spec (trainable, stop criterion, options) was lost with the "
    "journal's head; under resume=True, the add_trial call of its trainable and config "
    "(or add_trial(..., trial_id={trial_id!r})) continues it from its newest checkpoint"
)


@dataclass(frozen=True)
class RepairReport:
    """What a repair found and did. ``action``: ``"intact"`` (nothing done),
    ``"backup"`` (the backup became the head) or ``"rebuilt"``."""

    uri: str
    action: str
    problem: str | None = None  # what was damaged, in words
    trials: int = 0
    whole: int = 0  # trials whose journaled entry survived
    spec_lost: list[str] = field(default_factory=list)
    results: int = 0
    segments: int = 0  # segments read
    kept_aside: str | None = None  # where the damaged head was kept


async def repair_experiment(store: Any) -> RepairReport:
    """Repair the journal of the experiment whose root ``store`` (opened) is; see the
    module docstring. Raises :class:`ConfigError` when nothing of an experiment is
    there."""
    uri = store.uri
    try:
        contents = await load_experiment(store)
    except JournalDamaged as err:
        problem = f"{err.where} {err.what}"
    else:
        if contents is None and not await _any_pieces(store):
            raise ConfigError(
                f"no experiment at {uri}: no journal, result segments or checkpoints; "
                "check --storage and --name"
            )
        if contents is not None:
            return RepairReport(uri, "intact", trials=len(contents.trials))
        problem = f"{store.uri_for(JOURNAL_KEY)} is missing"
    head = await _read(store, JOURNAL_KEY)
    backup = await _read(store, BACKUP_KEY)
    if backup is not None and await _whole(store, backup):
        kept = await _keep_aside(store, head)
        await store.write_bytes(JOURNAL_KEY, backup)
        doc = parse_head(backup, store.uri_for(BACKUP_KEY), uri)
        trials = len(doc["trials"])
        return RepairReport(uri, "backup", problem, trials, trials, kept_aside=kept)
    return await _rebuild(store, problem, head, backup)


async def _rebuild(
    store: Any, problem: str, head: bytes | None, backup: bytes | None
) -> RepairReport:
    header, entries = _salvaged(head, backup)
    results, segments = await _results(store, header, entries)
    by_trial = await _committed_checkpoints(store)
    ids = [e["id"] for e in entries]
    found = sorted((set(results) | set(by_trial)) - set(ids))
    lost = [
        await _spec_lost_entry(store, t, results.get(t, []), by_trial.get(t, [])) for t in found
    ]
    every = entries + lost
    for entry in every:
        rows = results.setdefault(entry["id"], [])
        entry["results_count"] = len(rows)
        entry["last_result"] = rows[-1] if rows else None
    key = f"{SEGMENTS_PREFIX}/{segment_token()}-000000.jsonl"
    base = "".join(
        dumps({"trial": e["id"], "from": 0, "rows": results[e["id"]]}) + "\n"
        for e in every
        if results[e["id"]]
    )
    doc: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "name": header.get("name") or uri_name(store.uri),
        "started_at": header.get("started_at"),
        "written_at": time.time(),
        "repaired_at": time.time(),
    }
    if isinstance(header.get("sweeps"), list):
        doc["sweeps"] = header["sweeps"]
    doc["segments"] = [key]
    doc["trials"] = every
    kept = await _keep_aside(store, head)
    await store.write_bytes(key, base.encode())
    data = dumps(doc).encode()
    await store.write_bytes(JOURNAL_KEY, data)
    await store.write_bytes(BACKUP_KEY, data)
    return RepairReport(
        store.uri,
        "rebuilt",
        problem,
        trials=len(every),
        whole=len(entries),
        spec_lost=[e["id"] for e in lost],
        results=sum(len(r) for r in results.values()),
        segments=segments,
        kept_aside=kept,
    )


def uri_name(uri: str) -> str:
    return uri.rstrip("/").rpartition("/")[2]


def _salvaged(
    head: bytes | None, backup: bytes | None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and whole trial entries of whichever of head and backup kept more
    entries, with the other's extra entries after them."""
    heads = [salvage_head(data) for data in (head, backup) if data is not None]
    if not heads:
        return {}, []
    heads.sort(key=lambda found: len(found[1]), reverse=True)  # stable: the head on a tie
    header, entries = heads[0]
    seen = {e["id"] for e in entries}
    for _, others in heads[1:]:
        for entry in others:
            if entry["id"] not in seen:
                seen.add(entry["id"])
                entries.append(entry)
    return header, entries


async def _results(
    store: Any, header: dict[str, Any], entries: list[dict[str, Any]]
) -> tuple[dict[str, list[Any]], int]:
    """Every trial's results, and how many segments were read. When the salvaged
    header's segment list reads whole, exactly those (cut to the counts the entries
    record); otherwise every surviving segment, oldest first (whole lines only)."""
    listed = header.get("segments")
    if isinstance(listed, list) and listed:
        try:
            parts = []
            for key in listed:
                parts += parse_segment(await store.read_bytes(key), key, store.uri)
        except Exception:  # damaged or missing: fall back on all that survives
            pass
        else:
            results = _replay(parts)
            for entry in entries:
                count = entry.get("results_count")
                if isinstance(count, int):
                    del results.setdefault(entry["id"], [])[count:]
            return results, len(listed)
    keys = sorted(await store.list(SEGMENTS_PREFIX))
    parts = []
    for key in keys:
        try:
            parts += salvage_segment(await store.read_bytes(key))
        except Exception:  # unreadable: what the others hold still counts
            continue
    return _replay(parts), len(keys)


def _replay(parts: list[dict[str, Any]]) -> dict[str, list[Any]]:
    results: dict[str, list[Any]] = {}
    for part in parts:
        rows = results.setdefault(part["trial"], [])
        del rows[part["from"] :]
        rows.extend(part["rows"])
    return results


async def _committed_checkpoints(store: Any) -> dict[str, list[str]]:
    """Committed checkpoint keys in storage, by trial (the first part of the key)."""
    found: dict[str, list[str]] = {}
    for key in await store.list_checkpoints(""):
        trial, _, rest = key.partition("/")
        if rest and CHECKPOINT_NAME.match(rest):
            found.setdefault(trial, []).append(key)
    return found


async def _spec_lost_entry(
    store: Any, trial_id: str, results: list[Any], keys: list[str]
) -> dict[str, Any]:
    """The entry of a trial found only in the segments or as checkpoints."""
    last = _iteration(results[-1]) if results else 0
    newest: dict[int, tuple[int, str]] = {}  # iteration -> (suffix, key): the latest run's
    for key in keys:
        match = CHECKPOINT_NAME.match(key.partition("/")[2])
        assert match is not None
        iteration, suffix = int(match[1]), int(match[2] or 0)
        # Past its last result, a checkpoint is of a run that was rolled back (or of
        # results the journal never got): not on the trial's timeline.
        if iteration <= last and suffix >= newest.get(iteration, (-1, ""))[0]:
            newest[iteration] = (suffix, key)
    by_iteration = {_iteration(r): r for r in results}
    local = store.scheme == "file"
    checkpoints = []
    for iteration, (_, key) in sorted(newest.items()):
        try:
            manifest = (await store.read_manifest(key)).to_dict()
        except Exception:
            continue
        where = store.uri_for(key)
        checkpoints.append(
            {
                "trial_id": trial_id,
                "iteration": iteration,
                "key": key,
                "uri": "file://" + where if local else where,
                "path": where if local else None,
                "metrics": dict(by_iteration.get(iteration) or {}),
                "manifest": manifest,
                "node_id": None,
                "host": None,
            }
        )
    return {
        "id": trial_id,
        "spec_lost": True,
        "trainable": None,
        "config": await _params(store, trial_id),
        "resources": {},
        "checkpoint_every": 0,
        "max_failures": 0,
        "state": "ERROR",
        "iteration": last,
        "num_failures": 0,
        "error": SPEC_LOST_ERROR.format(trial_id=trial_id),
        "checkpoints": checkpoints,
    }


def _iteration(result: Any) -> int:
    value = result.get("training_iteration") if isinstance(result, dict) else None
    return value if isinstance(value, int) else 0


async def _params(store: Any, trial_id: str) -> dict[str, Any]:
    """The config the per-trial logger wrote (``params.json``), if it survives."""
    import json

    try:
        config = json.loads(await store.read_bytes(f"{trial_id}/params.json"))
    except Exception:
        return {}
    return config if isinstance(config, dict) else {}


async def _whole(store: Any, data: bytes) -> bool:
    """``data`` is a whole head whose listed segments read whole."""
    try:
        doc = parse_head(data, "", store.uri)
        for key in doc.get("segments") or []:
            parse_segment(await store.read_bytes(key), key, store.uri)
    except Exception:
        return False
    return True


async def _any_pieces(store: Any) -> bool:
    return bool(await store.list(SEGMENTS_PREFIX)) or bool(await store.list_checkpoints(""))


async def _read(store: Any, key: str) -> bytes | None:
    if not await store.exists(key):
        return None
    data: bytes = await store.read_bytes(key)
    return data


async def _keep_aside(store: Any, head: bytes | None) -> str | None:
    """Keep the damaged head beside the journal (it is evidence, and may hold more than
    repair could use); its key."""
    if head is None:
        return None
    key = f"experiment_state.damaged-{time.strftime('%Y%m%d-%H%M%S')}.json"
    await store.write_bytes(key, head)
    return key
