"""Rebuild a damaged journal from everything that survives (``python -m orchestrator repair``).

A journal whose head cannot be read cannot be resumed, and the experiment's work (its
checkpoints, its results) would be stranded. Repair never drops a result that any
object still holds, and names what it could not save:

1. a journal that reads whole is left alone (it says so);
2. the head's backup (``experiment_state.backup.json``, written beside the head by
   every journal write), when it and the segments it lists read whole, and no other
   source holds a result it lacks, becomes the head again, byte for byte;
3. otherwise the journal is rebuilt: the header (sweeps, start time) and every whole
   trial entry still in the head or its backup (a truncated head keeps everything
   before the cut); each trial's results from the result segments that survive
   (replayed in the order they were written, a lost segment leaving a *hole* that
   keeps the later rows in place), each hole and anything past the journal's end
   filled from the per-trial ``result.json``, the checkpoints' metrics and
   ``progress.csv`` (:mod:`orchestrator.journal.recovery`); and, for a trial found
   only in the segments, logs or checkpoints, an entry of what storage shows: its
   results, its committed checkpoints on its timeline, its config from
   ``params.json``. Its spec (trainable, stop criterion, options) was only in the head,
   so it is ERROR until an ``add_trial(..., trial_id=...)`` of a resumed experiment
   supplies one.

The :class:`RepairReport` names each damaged object and what it held, which results
came from where (``trial X: iterations 1-83 recovered from .../X/result.json``), and
every result no object holds any more (:attr:`RepairReport.complete` is False then).
The old head (damaged, or listing a damaged segment) is kept aside
(``experiment_state.damaged-<time>.json``), never deleted, and so is a copy of each
damaged segment (``experiment_state.damaged-<time>.results/``): the next journal
write's compaction deletes the segments the new head does not list. Repair needs
storage only: no Ray, no user code. The caller holds the experiment's lease
(:mod:`orchestrator.api.repair`).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.core.journal_format import (
    BACKUP_KEY,
    FORMAT_VERSION,
    JOURNAL_KEY,
    SEALED_PREFIX,
    SEGMENTS_PREFIX,
    merge_sealed,
    replay_parts,
)
from orchestrator.core.json_codec import dumps
from orchestrator.errors import ConfigError, JournalDamaged
from orchestrator.journal.damage import (
    damage_of_sealed,
    discontinuity,
    parse_head,
    parse_segment,
    salvage_head,
    salvage_sealed,
    sealed_list,
)
from orchestrator.journal.reader import load_experiment
from orchestrator.journal.recovery import Lost, Recovered, merge_trial
from orchestrator.journal.repair_report import RepairReport
from orchestrator.journal.sources import (
    CSV_LOG,
    JSON_LOG,
    Damaged,
    checkpoint_metrics,
    log_dirname,
    log_dirs,
    log_sources,
    segment_rows,
)
from orchestrator.journal.write_bytes import segment_token

__all__ = ["RepairReport", "check_repairable", "repair_experiment"]

#: A checkpoint key's last part: ``checkpoint_<iteration>`` and, for an iteration a
#: rolled-back run saved again, ``.<n>``.
CHECKPOINT_NAME = re.compile(r"^checkpoint_(\d+)(?:\.(\d+))?$")
#: The error a trial rebuilt without its spec carries (and ``show`` prints).
SPEC_LOST_ERROR = (
    "rebuilt by repair: its spec (trainable, stop criterion, options) was lost with the "
    "journal's head; under resume=True, the add_trial call of its trainable and config "
    "(or add_trial(..., trial_id={trial_id!r})) continues it from its newest checkpoint"
)


@dataclass
class _Found:
    """What storage holds, read once."""

    keys: list[str]
    head: bytes | None
    backup: bytes | None


@dataclass
class _Exact:
    """A head (or backup) that reads whole with every segment it lists."""

    header: dict[str, Any]
    entries: list[dict[str, Any]]
    positional: dict[str, list[Any]]  # every trial's results, as the journal has them
    segments: int
    is_backup: bool
    data: bytes


async def check_repairable(store: Any) -> list[str]:
    """Every key ``store`` (opened) holds, if it is the root of one experiment (a
    journal, its backup, result segments, checkpoints or trial logs); else
    :class:`ConfigError`, having written nothing (a storage root that holds
    experiments is not one)."""
    keys: list[str] = await store.list("")
    # No trial's folder holds a journal: journals one level down are experiments (even
    # beside a journal of the root's own, as an earlier repair of the root left).
    others = sorted({k.split("/")[0] for k in keys if k.count("/") == 1 and _is_head(k)})
    if others:
        shown = ", ".join(others[:5]) + (" ..." if len(others) > 5 else "")
        raise ConfigError(
            f"{store.uri} is not an experiment: it holds {len(others)} experiment(s) "
            f"({shown}); repair one with --storage {store.uri} --name <one of them>"
        )
    if _own_pieces(keys):
        return keys
    raise ConfigError(
        f"no experiment at {store.uri}: no journal, result segments, checkpoints or trial "
        "logs; check --storage and --name"
    )


def _is_head(key: str) -> bool:
    return key.rpartition("/")[2] in (JOURNAL_KEY, BACKUP_KEY)


def _own_pieces(keys: list[str]) -> bool:
    for key in keys:
        top, _, rest = key.partition("/")
        if not rest and top in (JOURNAL_KEY, BACKUP_KEY):
            return True
        if top in (SEGMENTS_PREFIX, SEALED_PREFIX) and rest:
            return True
        if rest in (JSON_LOG, CSV_LOG) or CHECKPOINT_NAME.match(rest.partition("/")[0]):
            return True
    return False


async def repair_experiment(store: Any) -> RepairReport:
    """Repair the journal of the experiment whose root ``store`` (opened) is; see the
    module docstring. Raises :class:`ConfigError`, writing nothing, when no experiment
    is there (or several are)."""
    keys = await check_repairable(store)
    try:
        contents = await load_experiment(store)
    except JournalDamaged as err:
        problem = f"{err.where} {err.what}"
    else:
        if contents is not None:
            return await _intact(store, len(contents.trials))
        problem = f"{store.uri_for(JOURNAL_KEY)} is missing"
    found = _Found(keys, await _read(store, JOURNAL_KEY), await _read(store, BACKUP_KEY))
    return await _rebuild(store, problem, found)


async def _intact(store: Any, trials: int) -> RepairReport:
    """A journal that reads whole; a backup that does not is rewritten from the head."""
    head = await store.read_bytes(JOURNAL_KEY)
    backup = await _read(store, BACKUP_KEY)
    found = _Found([], head, backup)
    damaged = _head_damage(store, found)
    if damaged:
        await store.write_bytes(BACKUP_KEY, head)
    return RepairReport(store.uri, "intact", trials=trials, damaged=damaged)


async def _rebuild(store: Any, problem: str, found: _Found) -> RepairReport:
    damaged = _head_damage(store, found)
    exact = await _exact(store, found)
    entries_lost = 0
    if exact is not None:
        header, entries = exact.header, exact.entries
        positional, segments = exact.positional, exact.segments
    else:
        header, entries = _salvaged(found.head, found.backup)
        # Sealed trials' whole entries and results, from the objects that survive; a
        # live entry (a trial that came back) overrides its sealed copy.
        records, entries_lost = await _sealed_records(store, found, damaged)
        merged, sealed = merge_sealed({"trials": entries}, [records])
        entries = merged["trials"]
        counts = {
            e["id"]: e["results_count"]
            for e in entries
            if isinstance(e.get("results_count"), int) and e["id"] not in sealed
        }
        positional, segments = await segment_rows(store, header, found.keys, damaged, counts)
        positional.update((trial, list(rows)) for trial, rows in sealed.items())
    for entry in entries:
        inline = entry.pop("results", None)  # a format-1 head's
        rows = positional.setdefault(entry["id"], [])
        if isinstance(inline, list) and not rows:
            rows.extend(inline)
        count = entry.get("results_count")
        if isinstance(count, int) and count >= 0:
            del rows[count:]
            rows.extend([None] * (count - len(rows)))
    by_trial = await _committed_checkpoints(store)
    ids = [e["id"] for e in entries]
    logs = log_dirs(found.keys)
    known = set(ids) | set(positional) | set(by_trial)
    extra = {d for d in logs if d not in {log_dirname(t) for t in known}}
    results: dict[str, list[Any]] = {}
    recovered: list[Recovered] = []
    lost: list[Lost] = []
    metrics = checkpoint_metrics(entries)
    for trial in [*ids, *sorted((known | extra) - set(ids))]:
        sources = await log_sources(store, trial, logs, damaged)
        sources.insert(1, ("its checkpoints' records in the journal", metrics.get(trial, {})))
        rows, got, missing = merge_trial(trial, positional.get(trial, []), sources)
        results[trial] = rows
        recovered += got
        lost += missing
        if trial not in ids:  # no count of its own: its newest checkpoint says how far it got
            last = max((_iteration(r) for r in rows), default=0)
            reached = max((_checkpoint_iteration(k) for k in by_trial.get(trial, [])), default=0)
            if reached > last:
                lost.append(Lost(trial, reached - last, last or None, reached + 1))
    found_only = [t for t in results if t not in ids and (results[t] or t in by_trial)]
    if exact is not None and exact.is_backup and not recovered and not lost:
        # The backup and its segments are whole and nothing else holds more: restore it.
        kept = await _keep_aside(store, found.head)
        await store.write_bytes(JOURNAL_KEY, exact.data)
        return RepairReport(
            store.uri,
            "backup",
            problem,
            len(ids),
            len(ids),
            results=_count(results),
            segments=segments,
            kept_aside=kept,
            damaged=damaged,
        )
    spec_lost = [
        await _spec_lost_entry(store, t, results[t], by_trial.get(t, [])) for t in found_only
    ]
    every = entries + spec_lost
    for entry in every:
        rows = results.get(entry["id"], [])
        entry["results_count"] = len(rows)
        entry["last_result"] = rows[-1] if rows else None
    key = f"{SEGMENTS_PREFIX}/{segment_token()}-000000.jsonl"
    base = "".join(
        dumps({"trial": e["id"], "from": 0, "rows": results[e["id"]]}) + "\n"
        for e in every
        if results.get(e["id"])
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
    bad = {d.where for d in damaged}
    ours = (SEGMENTS_PREFIX + "/", SEALED_PREFIX + "/")
    kept = await _keep_aside(
        store, found.head, [k for k in found.keys if k.startswith(ours) and store.uri_for(k) in bad]
    )
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
        spec_lost=[e["id"] for e in spec_lost],
        results=_count(results),
        segments=segments,
        kept_aside=kept,
        damaged=damaged,
        recovered=recovered,
        lost=lost,
        entries_lost=entries_lost,
    )


def _count(results: Mapping[str, list[Any]]) -> int:
    return sum(len(rows) for rows in results.values())


def _head_damage(store: Any, found: _Found) -> list[Damaged]:
    """The head and the backup, each if damaged, with the trial entries it still held."""
    damaged = []
    for key, data in ((JOURNAL_KEY, found.head), (BACKUP_KEY, found.backup)):
        where = store.uri_for(key)
        if data is None:
            damaged.append(Damaged(where, "is missing"))
            continue
        try:
            parse_head(data, where, store.uri)
        except JournalDamaged as err:
            _, entries = salvage_head(data)
            held = f"{len(entries)} whole trial entr{'y' if len(entries) == 1 else 'ies'} read"
            if entries:
                held += f" ({', '.join(e['id'] for e in entries)})"
            damaged.append(Damaged(where, err.what, held))
    return damaged


async def _exact(store: Any, found: _Found) -> _Exact | None:
    """The journal as the head or, failing that, the backup wrote it, when one of them
    and every segment it lists read whole."""
    for key, data in ((JOURNAL_KEY, found.head), (BACKUP_KEY, found.backup)):
        if data is None:
            continue
        try:
            head = parse_head(data, "", store.uri)
            parts: list[tuple[str, list[dict[str, Any]]]] = []
            for segment in head.get("segments") or []:
                lines = await store.read_bytes(segment)
                parts.append((segment, parse_segment(lines, segment, store.uri)))
            objects = []
            for item in sealed_list(head) or []:
                records = await store.read_bytes(item["key"])
                if damage_of_sealed(records, item) is not None:
                    raise ValueError(item["key"])
                objects.append(salvage_sealed(records))
        except Exception:  # damaged, or a listed segment or object is: not exact
            continue
        doc, sealed = merge_sealed(head, objects)
        if discontinuity(head, parts, sealed) is not None:  # lines lost from a segment
            continue
        results: dict[str, list[Any]] = dict(replay_parts(doc, [p for _, p in parts], sealed))
        header = {k: v for k, v in doc.items() if k != "trials"}
        return _Exact(header, list(doc["trials"]), results, len(parts), key == BACKUP_KEY, data)
    return None


async def _sealed_records(
    store: Any, found: _Found, damaged: list[Any]
) -> tuple[list[dict[str, Any]], int]:
    """The whole records of the sealed objects the head (or else its backup) lists, in
    its order; with no head that says, of every object that survives, in name order
    (the order they were written). Each damaged or missing one is added to ``damaged``
    with the entries it still held; the second value counts the entries the listed
    damaged ones held that none of them still holds."""
    listed: list[dict[str, Any]] | None = None
    for data in (found.head, found.backup):
        if data is not None:
            header, _ = salvage_head(data)
            if "sealed" in header:
                listed = sealed_list(header)
                break
    if listed is None:  # no head says: every object that survives
        present = sorted(k for k in found.keys if k.startswith(SEALED_PREFIX + "/"))
        items: list[tuple[str, dict[str, Any] | None]] = [(k, None) for k in present]
    else:
        items = [(item["key"], item) for item in listed]
    records: list[dict[str, Any]] = []
    lost = 0
    for key, item in items:
        where = store.uri_for(key)
        data = await _read(store, key)
        held = int(item.get("trials") or 0) if item is not None else 0
        if data is None:
            damaged.append(Damaged(where, f"is missing (the head lists it: {held} trial entries)"))
            lost += held
            continue
        problem = damage_of_sealed(data, item)
        whole = salvage_sealed(data)
        records += whole
        if problem is not None:
            read = f"{len(whole)} whole trial entr{'y' if len(whole) == 1 else 'ies'} read"
            if whole:
                read += f" ({', '.join(r['entry']['id'] for r in whole)})"
            damaged.append(Damaged(where, problem, read))
            lost += max(0, held - len(whole))
    return records, lost


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


def _checkpoint_iteration(key: str) -> int:
    match = CHECKPOINT_NAME.match(key.partition("/")[2])
    return int(match[1]) if match else 0


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


async def _read(store: Any, key: str) -> bytes | None:
    if not await store.exists(key):
        return None
    data: bytes = await store.read_bytes(key)
    return data


async def _keep_aside(store: Any, head: bytes | None, segments: Sequence[str] = ()) -> str | None:
    """Keep the old head beside the journal, and a copy of each damaged segment (the
    next compaction deletes every segment the new head does not list): evidence, which
    may hold more than repair could read. The head's key, if it was there."""
    stamp = f"experiment_state.damaged-{time.strftime('%Y%m%d-%H%M%S')}"
    for key in segments:
        with contextlib.suppress(Exception):  # gone meanwhile, or unreadable: nothing to keep
            await store.write_bytes(
                f"{stamp}.results/{key.rpartition('/')[2]}", await store.read_bytes(key)
            )
    if head is None:
        return None
    await store.write_bytes(f"{stamp}.json", head)
    return f"{stamp}.json"
