"""What a resumed experiment does with per-trial logs that hold more than its journal:
read before the trials are rebuilt, they give back the rows the journal lost, and a log
holding rows the resumed trial abandons is kept aside before a logger rewrites it. A
resume so never shortens a log that holds something nowhere else. The rules are
:mod:`orchestrator.core.trial_logs`; this is their storage side (local, S3, GCS alike:
a remote experiment's logs are uploaded under the same keys).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from orchestrator.core.journal_format import JournaledTrial
from orchestrator.core.trial_logs import (
    LINE_LOGS,
    RESULT_FILE,
    abandoned,
    kept_name,
    log_key,
    logged_iterations,
    lost_rows,
    result_rows,
    rewritten_holds,
    spans,
    with_rows,
)
from orchestrator.errors import JournalError

if TYPE_CHECKING:
    from orchestrator.engine.trial_runtime import TrialRuntime
    from orchestrator.journal.reader import JournalContents

__all__ = ["complete_from_logs", "keep_aside"]

log = logging.getLogger("orchestrator")

T = TypeVar("T")
R = TypeVar("R")

#: Trials whose logs are read at once (a remote experiment's reads are round trips).
READS_AT_ONCE = 16

#: Per trial, per log name: the iterations the log held when the journal was read.
LoggedIterations = Mapping[str, Mapping[str, tuple[int, ...]]]


async def complete_from_logs(store: Any, contents: JournalContents) -> JournalContents:
    """``contents`` with each trial's results completed from its ``result.json``, and
    the iterations each log read holds (``contents.logs``, for :func:`keep_aside`).

    A trial's logs are read unless the journal alone shows they hold nothing more
    (:func:`_whole`), :data:`READS_AT_ONCE` trials at a time, parsed in a worker thread
    (the lease is renewed on this loop). Each trial given rows back is named with what
    it got, in one line."""

    async def complete(entry: JournaledTrial) -> tuple[JournaledTrial, dict[str, Any]]:
        if _whole(entry):
            return entry, {}
        datas = {name: await _read(store, log_key(entry.id, name)) for name in LINE_LOGS}
        return await asyncio.to_thread(_complete, store, entry, datas)

    done = await _each(contents.trials, complete)
    logs = {entry.id: found for entry, found in done if found}
    return dataclasses.replace(contents, trials=[entry for entry, _ in done], logs=logs)


def _complete(
    store: Any, entry: JournaledTrial, datas: Mapping[str, bytes | None]
) -> tuple[JournaledTrial, dict[str, tuple[int, ...]]]:
    found: dict[str, tuple[int, ...]] = {}
    for name, data in datas.items():
        if data is None:
            continue
        if name != RESULT_FILE:
            found[name] = tuple(logged_iterations(name, data))
            continue
        rows = result_rows(data)
        found[name] = tuple(r["training_iteration"] for r in rows)
        lost = lost_rows(entry.results, rows, _bound(entry))
        if lost:
            entry = dataclasses.replace(entry, results=with_rows(entry.results, lost))
            log.warning(
                "trial %s: iterations %s recovered from %s (the journal had lost them)",
                entry.id,
                spans(r["training_iteration"] for r in lost),
                store.uri_for(log_key(entry.id, name)),
            )
    return entry, found


async def keep_aside(
    store: Any,
    trials: Iterable[TrialRuntime],
    logged: LoggedIterations,
    names: Collection[str],
    *,
    restarting: Collection[str] = (),
) -> list[str]:
    """Keep aside (copy to ``<name>.kept-<UTC time>``) each log ``names`` lists that
    holds an iteration its resumed trial's history lacks: the logger rewrites that log
    from the history, and those rows exist nowhere else. The ``restarting`` trials
    (whose spec the journal lost: an ``add_trial`` call may still restart them from
    their newest checkpoint) are compared with their history up to that checkpoint.
    Returns the kept copies' URIs, named in one warning."""
    now = time.time()
    jobs: list[tuple[str, str, list[int]]] = []  # (trial, log name, iterations to keep)
    for rt in trials:
        found = logged.get(rt.id)
        if not found:
            continue
        history = [r["training_iteration"] for r in rt.results]
        if rt.id in restarting:
            timeline = rt.machine.timeline
            until = timeline[-1].iteration if timeline else 0
            history = [i for i in history if i <= until]
        for name in names:
            extra = abandoned(found.get(name, ()), rewritten_holds(name, history))
            if extra:
                jobs.append((rt.id, name, extra))

    async def copy(job: tuple[str, str, list[int]]) -> str:
        trial_id, name, extra = job
        key = log_key(trial_id, name)
        try:
            aside = await _free_key(store, log_key(trial_id, kept_name(name, now)))
            await store.write_bytes(aside, await store.read_bytes(key))
        except Exception as err:
            raise JournalError(
                f"trial {trial_id}: could not keep {store.uri_for(key)} aside ({err}); it "
                f"holds iterations {spans(extra)} the resumed trial does not, and would be "
                "rewritten: move it away yourself, then resume again"
            ) from err
        return str(store.uri_for(aside))

    kept = await _each(jobs, copy)
    if kept:
        said = [f"{trial_id} ({name}: {spans(extra)})" for trial_id, name, extra in jobs]
        log.warning(
            "kept aside %d log(s) holding results the resumed trials' histories lack (an "
            "abandoned run's, after the checkpoint each restarts from): %s; the logs start "
            "again from each trial's history. Kept: %s",
            len(kept),
            "; ".join(said[:6]) + (f" and {len(said) - 6} more" if len(said) > 6 else ""),
            ", ".join(kept[:6]) + (f" and {len(kept) - 6} more" if len(kept) > 6 else ""),
        )
    return kept


def _whole(entry: JournaledTrial) -> bool:
    """Whether the journal alone shows that the trial's logs hold nothing its resumed
    history lacks: it settled (its last result was journaled before its state), its
    results run 1..n with n the newest iteration the journal vouches for, and it keeps
    them all (TERMINATED, or its newest checkpoint is at n). A finished experiment's
    resume so reads no log."""
    if entry.state not in ("TERMINATED", "PAUSED", "ERROR") or entry.config_pickle:
        return False  # (a config changed: its params_history.jsonl holds more than one)
    iterations = [r.get("training_iteration") for r in entry.results]
    n = len(iterations)
    if iterations != list(range(1, n + 1)) or n < _bound(entry):
        return False
    newest = entry.checkpoints[-1].iteration if entry.checkpoints else 0
    return entry.state == "TERMINATED" or newest == n


async def _each(
    items: Sequence[T], fn: Callable[[T], Awaitable[R]], limit: int = READS_AT_ONCE
) -> list[R]:
    """``[await fn(item) for item in items]``, ``limit`` at a time; the first failure
    cancels and awaits the rest."""
    gate = asyncio.Semaphore(limit)

    async def one(item: T) -> R:
        async with gate:
            return await fn(item)

    tasks = [asyncio.ensure_future(one(item)) for item in items]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _bound(entry: JournaledTrial) -> int:
    """The newest iteration the journal vouches for: its head's, a checkpoint's, its
    last result's (a lost segment takes results, never the head's count)."""
    marks = [entry.iteration, *(c.iteration for c in entry.checkpoints)]
    if entry.origin is not None:
        marks.append(entry.origin.iteration)
    if entry.results:
        marks.append(int(entry.results[-1].get("training_iteration", 0)))
    return max(marks)


async def _free_key(store: Any, key: str) -> str:
    """``key``, or ``key.2``, ``key.3``...: the first no object has (a copy kept aside
    by a resume in the same second is never overwritten)."""
    candidate, n = key, 1
    while await store.exists(candidate):
        n += 1
        candidate = f"{key}.{n}"
    return candidate


async def _read(store: Any, key: str) -> bytes | None:
    from storage import NotFound

    try:
        data: bytes = await store.read_bytes(key)
    except NotFound:
        return None
    except Exception as err:
        raise JournalError(
            f"cannot read {store.uri_for(key)} ({err}); a resume checks each trial's logs "
            "against its journal before rewriting them: fix the storage, or move the file "
            "away, then resume again"
        ) from err
    return data
