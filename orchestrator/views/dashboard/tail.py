"""One experiment's journal, read incrementally while its driver writes it.

The journal (see :mod:`orchestrator.journal.writer`) is a *head*, replaced atomically at
every write, that lists result *segments*, each written completely before a head lists
it and never changed after. So a reader that remembers which segments it has applied
reads, at each look, the head and only the segments the head newly lists: watching an
experiment costs one small read a second, whatever it has accumulated. When the head
lists segments that do not continue what was applied (the writer compacted them into a
new base), every listed segment is read again, which the compaction rule makes rare.

Reading is tolerant: a head or segment that cannot be read sets :attr:`JournalTail.problem`
(in words, naming the object) and keeps what was read before; a head whose segment the
writer deleted between the reads (a compaction) is read again. Nothing here writes.

Each look that finds something new bumps :attr:`JournalTail.version` and records a
:class:`Change` (which trials' head entries changed, and from which result index each
trial's results did), so that a page that has seen version ``v`` is sent only what
changed since.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.core.journal_format import BACKUP_KEY, JOURNAL_KEY, merge_sealed
from orchestrator.core.lease_record import LEASE_KEY
from orchestrator.views.dashboard.journal_checks import (
    HeadDamaged,
    SegmentDamaged,
    check_head,
    parse_segment,
)
from storage import LocalStorage, NotFound, Storage, StorageError

__all__ = ["BACKUP_KEY", "LEASE_KEY", "Change", "JournalTail"]

#: Changes remembered, for pages that reconnect; an older version is sent everything.
CHANGES_KEPT = 256
#: Tries to read a head and the segments it lists when the writer compacts between.
READ_TRIES = 3
#: A segment larger than this is parsed in a thread, so that the server answers other
#: requests meanwhile (a base of 200,000 results is about 40 MB).
THREAD_PARSE_BYTES = 1 << 20


@dataclass(frozen=True)
class Change:
    """What one look (or several, merged) found new."""

    version: int
    trials: frozenset[str] = frozenset()  # head entries new or changed
    results: Mapping[str, int] = field(default_factory=dict)  # trial -> first changed row
    header: bool = False  # the head's other fields, the trial list or the problem

    def merged(self, later: Change) -> Change:
        results = dict(self.results)
        for trial, first in later.results.items():
            results[trial] = min(first, results.get(trial, first))
        return Change(
            later.version, self.trials | later.trials, results, self.header or later.header
        )


class JournalTail:
    """One experiment's journal: its head's trial entries always, their results once
    :meth:`refresh` is asked for them (see the module docstring)."""

    def __init__(self, store: Storage, prefix: str, uri: str) -> None:
        self._store = store
        self._prefix = prefix
        self.uri = uri
        self.version = 0
        # Names this reading: versions of another (a restarted server) are not ours.
        self.epoch = secrets.token_hex(4)
        self.problem: str | None = None
        self.header: dict[str, Any] = {}  # the head's fields but trials and segments
        self.entries: dict[str, dict[str, Any]] = {}  # trial id -> head entry, in order
        self.loaded = False  # results are read (and kept up to date)
        self.read_at = 0.0  # monotonic time of the last look
        self.used_at = time.monotonic()
        self._rows: dict[str, list[dict[str, Any]]] = {}  # replayed, before the cut
        self._applied: list[str] = []  # the segments applied, in the head's order
        # Sealed objects read (immutable: read once), by key, as the head last listed.
        self._sealed: dict[str, list[dict[str, Any]]] = {}
        self._head_bytes: bytes | None = None
        self._head_mark: tuple[int, int, int] | None = None
        self._changes: collections.deque[Change] = collections.deque(maxlen=CHANGES_KEPT)
        self._lock = asyncio.Lock()
        # Per trial, a number that moves whenever its results change; and what callers
        # computed from results, for them to reuse while those numbers stand.
        self._stamps: dict[str, int] = {}
        self.memo: dict[Any, Any] = {}

    # -- what was read --------------------------------------------------------------

    def results(self, trial_id: str) -> list[dict[str, Any]]:
        """The trial's results, as a resume would read them (empty until loaded)."""
        rows = self._rows.get(trial_id, [])
        count = self.entries.get(trial_id, {}).get("results_count")
        if isinstance(count, int) and not isinstance(count, bool) and 0 <= count < len(rows):
            return rows[:count]
        return rows

    def stamp(self, trial_id: str) -> int:
        """A number that changes whenever the trial's results do."""
        return self._stamps.get(trial_id, 0)

    def changes_since(self, version: int) -> Change | None:
        """Everything that changed after ``version``, merged; an empty change when
        nothing did; None when ``version`` is too old (or from another reading)."""
        if version == self.version:
            return Change(version)
        if version > self.version or not self._changes or self._changes[0].version > version + 1:
            return None
        merged: Change | None = None
        for change in self._changes:
            if change.version > version:
                merged = change if merged is None else merged.merged(change)
        return merged

    def drop_results(self) -> None:
        """Forget the results (nobody has looked for a while); the next look that asks
        for them reads every segment again."""
        self.loaded = False
        self._rows = {}
        self._applied = []
        self._head_bytes = self._head_mark = None
        self._changes.clear()
        self.memo.clear()
        self.epoch = secrets.token_hex(4)
        self.version += 1

    # -- looking --------------------------------------------------------------------

    async def refresh(self, *, results: bool = False, fresh_within: float = 0.0) -> None:
        """Read what is new; with ``results``, read (and from now on keep up) every
        trial's results too. A look that ended less than ``fresh_within`` seconds ago
        is enough. Never raises for a damaged journal or a storage error: see
        :attr:`problem`."""
        self.used_at = time.monotonic()
        async with self._lock:
            if results and not self.loaded:
                self.loaded = True
                self._head_bytes = self._head_mark = None  # apply the head's segments
            elif time.monotonic() - self.read_at < fresh_within:
                return
            try:
                await self._look()
            finally:
                self.read_at = time.monotonic()

    async def _look(self) -> None:
        problem: str | None
        for _ in range(READ_TRIES):
            try:
                mark = self._local_mark(JOURNAL_KEY)
                if mark is not None and mark == self._head_mark:
                    return  # the head applied last time: nothing is new
                try:
                    data = await self._store.read_bytes(self._key(JOURNAL_KEY))
                except NotFound:
                    problem = await self._headless()
                    break
                if data == self._head_bytes:
                    self._head_mark = mark
                    return
                if not await self._apply(check_head(data), data):
                    continue  # a listed segment is gone: the writer compacted; read again
                self._head_mark = mark
                problem = None
                break
            except HeadDamaged as err:
                problem = await self._damaged(f"{self._where(JOURNAL_KEY)} {err}")
                break
            except SegmentDamaged as err:
                problem = f"the journal of this experiment is damaged: {err}"
                break
            except StorageError as err:
                problem = f"cannot read the journal at {self._where(JOURNAL_KEY)}: {err}"
                break
        else:
            problem = (
                f"the journal at {self._where(JOURNAL_KEY)} lists result segments that are "
                "gone when read: it is being rewritten, or damaged"
            )
        if problem != self.problem:
            self.problem = problem
            self._record(Change(self.version + 1, header=True))

    async def _sealed_objects(self, doc: dict[str, Any]) -> list[list[dict[str, Any]]] | None:
        """The records of the sealed objects ``doc`` lists (format 3), each read once;
        None when one is gone (merged meanwhile: read the head again)."""
        from orchestrator.journal.damage import damage_of_sealed, salvage_sealed, sealed_list

        listed = sealed_list(doc)
        if listed is None:
            raise HeadDamaged("has a 'sealed' field that is not a list of sealed objects")
        found: dict[str, list[dict[str, Any]]] = {}
        for item in listed:
            key = item["key"]
            if key not in self._sealed:
                try:
                    data = await self._store.read_bytes(self._key(key))
                except NotFound:
                    return None
                damage = damage_of_sealed(data, item)
                if damage is not None:
                    raise SegmentDamaged(f"sealed object {self._where(key)} {damage}")
                self._sealed[key] = salvage_sealed(data)
            found[key] = self._sealed[key]
        self._sealed = found
        return list(found.values())

    async def _headless(self) -> str:
        self._head_bytes = self._head_mark = None
        try:
            backup = await self._store.read_bytes(self._key(BACKUP_KEY))
        except NotFound:
            return (
                f"no journal at {self._where(JOURNAL_KEY)} (yet): the experiment is starting, "
                "or was deleted"
            )
        return await self._from_backup(backup, f"{self._where(JOURNAL_KEY)} is missing")

    async def _damaged(self, what: str) -> str:
        self._head_bytes = self._head_mark = None  # read it again at the next look
        damage = f"the journal of this experiment is damaged: {what}"
        try:
            backup = await self._store.read_bytes(self._key(BACKUP_KEY))
        except StorageError:  # NotFound among them
            return damage + ("; shown as it was last read" if self.entries else "")
        return await self._from_backup(backup, damage)

    async def _from_backup(self, data: bytes, why: str) -> str:
        try:
            if not await self._apply(check_head(data), data):
                raise HeadDamaged("lists result segments that are gone")
        except (HeadDamaged, SegmentDamaged, StorageError) as err:
            return f"{why}; its backup {self._where(BACKUP_KEY)} cannot be used either: {err}"
        self._head_bytes = None  # the head is what is read next time
        return f"{why}; shown from its backup {self._where(BACKUP_KEY)}"

    async def _apply(self, doc: dict[str, Any], data: bytes) -> bool:
        """Make ``doc`` (the head ``data`` holds) what is shown: its entries, and with
        results loaded the segments it newly lists. False, with nothing applied, when a
        listed segment is gone. :class:`SegmentDamaged` names a damaged segment (the
        whole lines before the damage are applied), or a damaged sealed object."""
        objects = await self._sealed_objects(doc)
        if objects is None:
            return False
        doc, sealed = merge_sealed(doc, objects)
        entries = {e["id"]: e for e in doc["trials"]}
        old_lengths = {t: len(self.results(t)) for t in self._rows}
        rows, applied, full = self._rows, self._applied, False
        first: dict[str, int] = {}
        damaged: str | None = None
        if self.loaded and int(doc.get("format", 1)) < 2:  # format 1: results inline
            rows = {
                t: [r for r in e.get("results") or [] if isinstance(r, dict)]
                for t, e in entries.items()
            }
            applied, full = [], True
        elif self.loaded:
            listed: list[str] = list(doc.get("segments") or [])
            continues = listed[: len(applied)] == applied
            if not continues:
                rows, applied, full = {}, [], True
            segments: list[tuple[str, bytes]] = []
            for key in listed[len(applied) :]:
                try:
                    segments.append((key, await self._store.read_bytes(self._key(key))))
                except NotFound:
                    return False
            applied = list(applied)
            for key, segment in segments:
                if len(segment) > THREAD_PARSE_BYTES:  # other requests go on meanwhile
                    parts, damage = await asyncio.to_thread(_parse_quietly, segment)
                else:
                    parts, damage = _parse_quietly(segment)
                for trial, start, new_rows in parts:
                    if trial in sealed:  # older than its sealed copy (below)
                        continue
                    kept = rows.setdefault(trial, [])
                    del kept[start:]
                    kept.extend(new_rows)
                    first[trial] = min(start, first.get(trial, start))
                if damage is not None:
                    damaged = f"result segment {self._where(key)} is damaged: {damage}"
                    break
                applied.append(key)
            for trial, sealed_rows in sealed.items():
                if rows.get(trial) != sealed_rows:
                    rows[trial] = [r for r in sealed_rows if isinstance(r, dict)]
                    first[trial] = 0
        old = {t: self.results(t) for t in self._rows} if full else {}
        header = {k: v for k, v in doc.items() if k not in ("trials", "segments", "sealed")}
        changed_entries = frozenset(t for t, e in entries.items() if self.entries.get(t) != e)
        header_changed = header != self.header or list(entries) != list(self.entries)
        self._rows, self._applied, self.entries, self.header = rows, applied, entries, header
        self._head_bytes = data if damaged is None else None
        if full:
            results = self._parted(old)
        else:
            results = self._grown(old_lengths, first)
        if changed_entries or results or header_changed:
            self._record(Change(self.version + 1, changed_entries, results, header_changed))
        if damaged is not None:
            raise SegmentDamaged(damaged)
        return True

    def _grown(self, before: Mapping[str, int], first: Mapping[str, int]) -> dict[str, int]:
        """Per trial whose results changed, the first index that did, after segments
        that continue the ones applied (rows from ``first`` replaced) and a new cut."""
        changed: dict[str, int] = {}
        for trial in set(self._rows) | set(before):
            was, now = before.get(trial, 0), len(self.results(trial))
            start = min(first.get(trial, was), was, now)
            if start < now or was != now:
                changed[trial] = start
        return changed

    def _parted(self, old: Mapping[str, list[dict[str, Any]]]) -> dict[str, int]:
        """Per trial, where its results read afresh part from ``old`` (a compaction
        rewrote the same rows: nothing is sent again)."""
        changed: dict[str, int] = {}
        for trial in set(self._rows) | set(old):
            before, now = old.get(trial, []), self.results(trial)
            same = 0
            for a, b in zip(before, now, strict=False):
                if a != b:
                    break
                same += 1
            if same < len(now) or len(before) != len(now):
                changed[trial] = same
        return changed

    def _record(self, change: Change) -> None:
        self.version = change.version
        self._changes.append(change)
        for trial in change.results:
            self._stamps[trial] = self._stamps.get(trial, 0) + 1

    # -- storage --------------------------------------------------------------------

    def _key(self, name: str) -> str:
        return f"{self._prefix}/{name}" if self._prefix else name

    def _where(self, name: str) -> str:
        return self._store.uri_for(self._key(name))

    def _local_mark(self, name: str) -> tuple[int, int, int] | None:
        """A local file's identity and size and time (its atomic replacement changes
        it): an unchanged head is then not even read. None elsewhere."""
        if not isinstance(self._store, LocalStorage):
            return None
        try:
            st = os.stat(self._where(name))
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)


def _parse_quietly(segment: bytes) -> tuple[list[tuple[str, int, list[Any]]], str | None]:
    """:func:`parse_segment` without the cyclic collector: parsing allocates a
    container per result and frees none, and the collector's passes meanwhile find
    nothing and cost a third of the time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return parse_segment(segment)
    finally:
        if enabled:
            gc.enable()
