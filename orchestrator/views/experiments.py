"""The experiment journal as plain data, for looking at, not for resuming.

``Orchestrator(resume=True)`` reads the journal with :mod:`orchestrator.journal.reader`,
which rebuilds trials and may import their code. Looking at an experiment (``ls``,
``show``, ``plot``, a notebook) must work anywhere: on a laptop without the training
code, on a journal whose trainable module was renamed since. So this module never
unpickles (no ``config_pickle``, ``trainable_pickle`` or ``stop_pickle``) and never
imports a trainable: a trial's config is the JSON ``config`` field (values JSON could not
hold are their ``repr``; ``config_now`` the JSON of its config since an exploit), its
trainable the import path as a string.

Fields that newer writers add are passed through when present and defaulted when
absent: per trial ``"events"`` (restores, failures, exploits), and at the top level
``"sweeps"`` (each with ``"name"``, ``"metric"``, ``"mode"``, its trials' number
``"created_count"``, or format 3's list ``"trials"``, and PBT's ``"lineage"``) and
``"started_at"``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.core.best import metric_value, pick_best, standing
from orchestrator.core.journal_format import (
    BACKUP_KEY,
    JOURNAL_KEY,
    merge_sealed,
    replay_results,
)
from orchestrator.core.json_codec import loads
from orchestrator.core.results import flatten
from orchestrator.core.sweep_doc import created_ids
from orchestrator.errors import JournalDamaged, JournalError
from storage import LocalStorage, Storage, open_storage

__all__ = [
    "CHECKPOINT_FIELDS",
    "ExperimentRecord",
    "ExperimentSummary",
    "StoredTrial",
    "list_experiments",
    "metric_value",
    "read_experiment",
]

#: The fields of each journaled checkpoint a :class:`StoredTrial` keeps (manifests and
#: node ids are for restoring, and a manifest lists every file).
CHECKPOINT_FIELDS = ("iteration", "uri", "key", "metrics")
#: Experiments read at once by :func:`list_experiments`.
READ_CONCURRENCY = 8


@dataclass(frozen=True)
class StoredTrial:
    """One trial as its journal recorded it, read for people (``ls``, ``show``, ``plot``,
    a Tune ``ResultGrid`` read back): plain JSON, no pickle loaded. (The engine's read,
    to resume, is :class:`~orchestrator.core.journal_format.JournaledTrial`.)"""

    id: str
    trainable: str  # the import path, or "(pickled)"
    config: dict[str, Any]
    state: str
    iteration: int
    num_failures: int
    error: str | None
    checkpoints: list[dict[str, Any]]  # oldest first; each has CHECKPOINT_FIELDS
    results: list[dict[str, Any]]
    events: list[dict[str, Any]]  # {"kind": "restore" | "failure" | "exploit" | "killed", ...}
    config_now: dict[str, Any] | None = None  # its config since a PBT exploit changed it

    @property
    def last_result(self) -> dict[str, Any]:
        return self.results[-1] if self.results else {}


@dataclass(frozen=True)
class ExperimentRecord:
    """An experiment's journal: every trial, and the sweeps that drove them."""

    name: str
    uri: str
    written_at: float | None
    trials: list[StoredTrial]
    sweeps: list[dict[str, Any]]
    started_at: float | None = None  # the head's, else the earliest result's, else written_at

    def objective(self) -> tuple[str, str] | None:
        """``(metric, mode)`` of the first sweep that names both, else None."""
        sweep = _objective_sweep(self.sweeps)
        return (sweep["metric"], sweep["mode"]) if sweep is not None else None

    def best(self, metric: str, mode: str) -> tuple[str, float] | None:
        """``(trial id, value)`` of the best trial by ``metric`` (:mod:`orchestrator.core.best`)."""
        return _best(self.trials, metric, mode)

    def metric_keys(self) -> list[str]:
        """Every key the trials' results hold (nested ones as ``a/b``), sorted."""
        return sorted({k for t in self.trials for r in t.results for k in flatten(r)})


@dataclass(frozen=True)
class ExperimentSummary:
    """One line of ``ls``. ``best`` is ``(trial id, value)`` by the first sweep's
    ``metric`` and ``mode`` (None without a sweep, or when no trial reported it)."""

    name: str
    uri: str
    trials_by_state: dict[str, int]
    started_at: float | None
    written_at: float | None
    best: tuple[str, float] | None
    metric: str | None = None
    mode: str | None = None
    #: What is wrong with its journal, when it is damaged (then it has no trials here):
    #: ``python -m orchestrator repair`` recovers what survives.
    damaged: str | None = None


async def read_experiment(store: Storage) -> ExperimentRecord | None:
    """The experiment whose root ``store`` is, or None when it has no journal.

    Raises :class:`JournalError` when the journal cannot be parsed or lists a result
    segment that cannot be read, and the storage's errors otherwise.
    """
    return await _read(store, "")


async def list_experiments(storage_uri: str, **storage_options: Any) -> list[ExperimentSummary]:
    """Every experiment directly under ``storage_uri`` (a child holding a journal, or
    the backup of one), sorted by name. Raises the storage's ``BucketNotFound`` when
    the root does not exist. An experiment whose journal cannot be read is listed with
    what is wrong (``damaged``) and no trials, so that one damaged journal neither
    hides the others nor goes unseen; :func:`read_experiment` raises for it.

    A local root is listed one level deep. S3 and GCS have no directories and the
    storage contract lists keys recursively, so there every key under the root is
    listed to find the ``*/experiment_state.json`` ones.
    """
    async with open_storage(storage_uri, **storage_options) as store:
        names = await _experiment_names(store)
        limit = asyncio.Semaphore(READ_CONCURRENCY)

        async def one(name: str) -> ExperimentSummary | None:
            async with limit:
                try:
                    record = await _read(store, name)
                except JournalDamaged as err:
                    return _damaged(store, name, f"{_short(err.where, name)} {err.what}")
                except JournalError as err:
                    return _damaged(store, name, str(err))
                return None if record is None else _summary(record)

        summaries = await asyncio.gather(*(one(name) for name in names))
    return [s for s in summaries if s is not None]


def _damaged(store: Storage, name: str, what: str) -> ExperimentSummary:
    return ExperimentSummary(name, store.uri_for(name), {}, None, None, None, damaged=what)


def _short(where: str, name: str) -> str:
    """An object's URI as its key within the experiment ``name``."""
    marker = f"/{name}/"
    return where.rpartition(marker)[2] if marker in where else where


# -- reading ---------------------------------------------------------------------------


def _within(prefix: str, key: str) -> str:
    return f"{prefix}/{key}" if prefix else key


async def _read(store: Storage, prefix: str) -> ExperimentRecord | None:
    """The experiment under ``prefix`` of ``store`` ("": its root). Experiments are
    read through their root's storage so that ``ls`` opens one client, not one each."""
    from orchestrator.journal.damage import (
        damage_of,
        damage_of_segment,
        damaged,
        parse_sealed,
        sealed_list,
    )
    from storage import NotFound

    journal_key = _within(prefix, JOURNAL_KEY)
    where = store.uri_for(journal_key)
    experiment = store.uri_for(prefix) if prefix else store.uri
    if not await store.exists(journal_key):
        if await store.exists(_within(prefix, BACKUP_KEY)):
            raise damaged(experiment, where, "is missing (its backup is there)")
        return None
    data = await store.read_bytes(journal_key)
    what = damage_of(data)
    if what is not None:
        raise damaged(experiment, where, what)
    try:
        head = loads(data)
        if not isinstance(head, dict) or not isinstance(head.get("trials"), list):
            raise ValueError("not a journal head: no trials list")
        inline = int(head.get("format", 1)) < 2  # format 1: no segments
    except (ValueError, TypeError) as err:
        raise damaged(experiment, where, f"cannot be read: {err}") from err
    segments = []
    listed = [] if inline else head.get("segments") or []
    for key in listed:
        segment = store.uri_for(_within(prefix, key))
        try:
            segments.append(await store.read_bytes(_within(prefix, key)))
        except NotFound as err:
            raise damaged(experiment, segment, f"is missing (the head {where} lists it)") from err
        except Exception as err:
            raise JournalError(
                f"the journal at {where} lists result segment {segment}, which cannot be "
                f"read ({err})"
            ) from err
        what = damage_of_segment(segments[-1])
        if what is not None:
            raise damaged(experiment, segment, what)
    objects = []
    for item in sealed_list(head) or []:  # format 3: sealed trials' entries and results
        key = _within(prefix, item["key"])
        try:
            data = await store.read_bytes(key)
        except NotFound as err:
            raise damaged(
                experiment, store.uri_for(key), f"is missing (the head {where} lists it)"
            ) from err
        objects.append(parse_sealed(data, store.uri_for(key), experiment, item))
    try:
        doc, sealed = merge_sealed(head, objects)
        results = replay_results(doc, segments, sealed)
        trials = [_trial(entry, results.get(entry["id"], [])) for entry in doc["trials"]]
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise damaged(experiment, where, f"has a damaged part: {err!r}") from err
    written_at = _number(head.get("written_at"))
    uri = store.uri_for(prefix) if prefix else store.uri
    return ExperimentRecord(
        # Named by its folder, what `show --name` takes (the head's name is the one it
        # ran under: the same, unless the folder was moved since).
        name=uri.rstrip("/").rpartition("/")[2] or str(head.get("name") or ""),
        uri=uri,
        written_at=written_at,
        trials=trials,
        sweeps=[dict(s) for s in head.get("sweeps") or [] if isinstance(s, Mapping)],
        started_at=_started_at(head, trials, written_at),
    )


def _trial(entry: Mapping[str, Any], results: list[dict[str, Any]]) -> StoredTrial:
    config = entry.get("config")
    return StoredTrial(
        id=str(entry["id"]),
        trainable=str(entry.get("trainable") or "(pickled)"),
        config=dict(config) if isinstance(config, Mapping) else {},
        state=str(entry.get("state", "UNKNOWN")),
        iteration=int(entry.get("iteration") or _last_iteration(results)),
        num_failures=int(entry.get("num_failures") or 0),
        error=entry.get("error"),
        checkpoints=[
            {k: c.get(k) for k in CHECKPOINT_FIELDS} for c in entry.get("checkpoints") or []
        ],
        results=results,
        events=[dict(e) for e in entry.get("events") or [] if isinstance(e, Mapping)],
        config_now=dict(now) if isinstance(now := entry.get("config_now"), Mapping) else None,
    )


def _last_iteration(results: Sequence[Mapping[str, Any]]) -> int:
    return int(results[-1].get("training_iteration") or 0) if results else 0


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _started_at(
    head: Mapping[str, Any], trials: Sequence[StoredTrial], written_at: float | None
) -> float | None:
    """The head's ``started_at``; else the earliest result's ``timestamp`` (a trainable
    may report one; the orchestrator adds none); else the last write's time."""
    started = _number(head.get("started_at"))
    if started is not None:
        return started
    stamps = [s for t in trials for r in t.results if (s := _number(r.get("timestamp")))]
    return min(stamps) if stamps else written_at


# -- listing ---------------------------------------------------------------------------


async def _experiment_names(store: Storage) -> list[str]:
    if isinstance(store, LocalStorage):
        await store.open()  # BucketNotFound when the root directory does not exist
        return await asyncio.to_thread(_local_names, store.root)
    found = []
    for key in await store.list(""):
        name, sep, rest = key.partition("/")
        if sep and rest in (JOURNAL_KEY, BACKUP_KEY):
            found.append(name)
    return sorted(set(found))


def _local_names(root: str) -> list[str]:
    with os.scandir(root) as entries:
        return sorted(
            e.name
            for e in entries
            if e.is_dir()
            and any(
                os.path.isfile(os.path.join(root, e.name, k)) for k in (JOURNAL_KEY, BACKUP_KEY)
            )
        )


def _summary(record: ExperimentRecord) -> ExperimentSummary:
    counts: dict[str, int] = {}
    for trial in record.trials:
        counts[trial.state] = counts.get(trial.state, 0) + 1
    sweep = _objective_sweep(record.sweeps)
    best = metric = mode = None
    if sweep is not None:
        metric, mode = sweep["metric"], sweep["mode"]
        ids = set(created_ids(sweep))  # none: every trial
        best = _best([t for t in record.trials if not ids or t.id in ids], metric, mode)
    return ExperimentSummary(
        name=record.name,
        uri=record.uri,
        trials_by_state=dict(sorted(counts.items())),
        started_at=record.started_at,
        written_at=record.written_at,
        best=best,
        metric=metric,
        mode=mode,
    )


def _objective_sweep(sweeps: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    for sweep in sweeps:
        if isinstance(sweep.get("metric"), str) and sweep.get("mode") in ("max", "min"):
            return sweep
    return None


def _best(trials: Sequence[StoredTrial], metric: str, mode: str) -> tuple[str, float] | None:
    return pick_best(((t.id, standing(t.results, metric, mode)) for t in trials), mode)
