"""The experiment journal: what a restarted driver needs to carry on.

The driver keeps, in the experiment's storage, every trial's spec (trainable, config,
stop criterion, policy), state, checkpoints (with their manifests), failure count, last
error and result history. Writes are atomic (the storage's ``write_bytes``), batched (at
most one per ``interval`` for plain results; a checkpoint persisted or a trial's end
is in storage within :data:`~orchestrator.journal.pace.DURABLE_WITHIN_S`), and done by
a background task, so the loop never waits for them. Each result is serialised once,
when it is reported.

Two kinds of object hold it, so that a write costs what changed, not what the
experiment has accumulated (about 100 bytes a result: 100 MB at a million):

* ``experiment_state.json``, the *head*: every trial's small part (spec, state,
  checkpoints, how many results it has) and the ordered list of result segments. It is
  rewritten on every write; replacing it is what commits a write.
* result *segments* under ``experiment_state.results/``: each holds the results
  recorded since the previous write, as ``{"trial", "from", "rows"}`` lines (rows
  replace a trial's results from index ``from`` on, which is how a rollback is
  recorded). A segment is written, under a name never used before, before the head
  that lists it, so a driver that dies between the two leaves only an unlisted object.
  When the segments since the first (the *base*) outweigh it, or number
  :data:`COMPACT_AFTER` of them, the next write rewrites every result into a new base;
  the old segments are deleted once the head no longer lists them. Every result is so
  rewritten a bounded number of times on average, and a resume reads at most
  :data:`COMPACT_AFTER` objects.
* *sealed objects* under ``experiment_state.sealed/`` (:mod:`orchestrator.journal.sealed`):
  a trial that is over leaves the head, once, for an immutable object holding its part
  and its results, listed by the head with its size and SHA-256; so the head holds the
  live trials, and a write costs what changed, not every trial the experiment had.

The pause between writes grows with what a write costs (:mod:`orchestrator.journal.pace`):
with the CPU time of building it, so the journal never takes more than a small share of
the driver's CPU, and with the time storage took to take it, so a slow bucket is not
kept busy. Wall time alone was a poor measure of the first: under
load, or through one slow fsync, a small journal's write looked expensive and the next
waited seconds, and a driver that died then resumed from older checkpoints than it
needed to.

``Orchestrator(resume=True)`` reads it back (see :func:`load`): a trial that was
training restarts from its newest checkpoint that is both journaled *and* still in
storage, so a checkpoint deleted by garbage collection is never resurrected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from array import array
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.core.journal_format import (
    BACKUP_KEY,
    FORMAT_VERSION,
    JOURNAL_KEY,
    SEALED_PREFIX,
    SEGMENTS_PREFIX,
)
from orchestrator.core.json_codec import dumps
from orchestrator.errors import JournalError
from orchestrator.journal.pace import WritePace
from orchestrator.journal.retirement import Retirement
from orchestrator.journal.sealed import SealedBook
from orchestrator.journal.spill import SpillRef
from orchestrator.journal.write_bytes import Built, Write, build_timed, segment_token

if TYPE_CHECKING:
    from orchestrator.engine.trial_runtime import TrialRuntime

log = logging.getLogger("orchestrator.journal")

#: Segments the head may list before the next write compacts them into one base.
COMPACT_AFTER = 32


class Journal:
    """Batches and writes the experiment's state; see the module docstring."""

    def __init__(self, storage: Any, *, name: str, interval: float = 1.0) -> None:
        self._storage = storage
        self._name = name
        self._trials: dict[str, TrialRuntime] = {}
        # The unsettled trials' specs (the start of their heads); a settled trial's is
        # the start of its kept head, not kept twice.
        self._specs: dict[str, str] = {}
        # Every trial's part of the head as last built, in the trials' order: a write
        # copies the list and builds again only the parts of the trials it looks at.
        # For a settled trial's kept part, the length of its spec (-1: not kept).
        self._index: dict[str, int] = {}
        self._texts: list[str | None] = []
        self._spec_lens = array("q")
        # A sealed trial's part is not kept in memory (None in ``_texts``) but in the
        # retirement's heads file, at this offset and length (-1: in ``_texts``).
        self._text_at = array("q")
        self._text_len = array("q")
        self._ids: list[str] = []  # by position
        self._live: set[int] = set()  # the positions of the parts the head holds
        # Each trial's serialised results; a finished trial's, once stored, only their
        # place in the spill file (:mod:`orchestrator.journal.spill`).
        self._results: dict[str, list[str] | SpillRef] = {}
        self._retirement = Retirement()  # the spill file, and finished trials' records
        # Per trial, how many of its results the listed segments hold as they are now,
        # and the lowest length it was cut to (a rollback) while a write was under way.
        self._stored: dict[str, int] = {}
        self._cut: dict[str, int] = {}
        # The trials a write must look at: those the loop handled an event for, and
        # those with results not in a listed segment yet, since the last capture. Every
        # other trial is settled and unchanged, and its kept head is reused without a
        # look: a write's work on the loop is what changed, not every trial (issue 36).
        self._looked_for: set[str] = set()
        self._unstored: set[str] = set()
        self._segments: list[str] = []  # the keys the head in storage lists, oldest first
        self._base_bytes = 0
        self._tail_bytes = 0  # segments after the base
        self._token = segment_token()
        self._sealed = SealedBook(self._token)  # sealed objects (``journal/sealed.py``)
        self._next_segment = 0
        self._dirty = asyncio.Event()
        self._pace = WritePace(interval)  # when the next write is due
        # One write at a time: two at once could store their heads in either order (an
        # older state last) and one's deletions could take what the other's head lists.
        self._one_write = asyncio.Lock()
        self._after_write: list[Callable[[], None]] = []
        self._task: asyncio.Task[None] | None = None
        self.writes = 0
        self.failed_writes = 0
        # What the writes stored, in bytes (every object, the head's backup too), and
        # the last head's size: what a write costs storage (``benchmarks/bench_scale``).
        self.bytes_written = 0
        self.head_bytes = 0
        self.started_at = time.time()  # kept across resumes (``JournalContents.extras``)
        # What else the head carries, built on the loop at each write: the sweeps'
        # state (searcher, scheduler, which trials they created).
        self._extras: Callable[[], dict[str, Any]] | None = None
        self._may_write: Callable[[], bool] | None = None

    # -- recording (sync, cheap: called from the loop) ----------------------------------

    def track(self, trial: TrialRuntime) -> None:
        self._trials[trial.id] = trial
        fields = dumps(trial.spec.to_json())[1:-1]  # never changes: serialised once
        self._specs[trial.id] = "{" + fields + ("," if fields else "")
        if trial.id in self._index:
            self._spec_lens[self._index[trial.id]] = -1
        else:
            self._index[trial.id] = len(self._texts)
            self._live.add(len(self._ids))
            self._ids.append(trial.id)
            self._sealed.track()
            self._texts.append("")
            self._spec_lens.append(-1)
            self._text_at.append(-1)
            self._text_len.append(0)
        self._results[trial.id] = [dumps(r) for r in trial.results]
        self._stored[trial.id] = 0
        self._looked_for.add(trial.id)
        self._unstored.add(trial.id)
        self.touch()

    def record_result(self, trial: TrialRuntime, result: Mapping[str, Any]) -> None:
        self._rows(trial.id).append(dumps(result))
        self._looked_for.add(trial.id)
        self._unstored.add(trial.id)
        self._dirty.set()

    def truncate(self, trial: TrialRuntime, length: int) -> None:
        del self._rows(trial.id)[length:]
        self._stored[trial.id] = min(self._stored[trial.id], length)
        self._cut[trial.id] = min(self._cut.get(trial.id, length), length)
        self._looked_for.add(trial.id)
        self._unstored.add(trial.id)
        self._dirty.set()

    def _rows(self, trial_id: str) -> list[str]:
        """The trial's rows as a list in memory again (read back if spilled: the trial
        came back, and gets new results or a rollback)."""
        rows = self._results[trial_id]
        if isinstance(rows, SpillRef):
            spill = self._retirement.spill
            assert spill is not None
            rows = self._results[trial_id] = spill.get(rows)
        return rows

    def kept(self, trial_id: str) -> bool:
        """The trial's part of the head is kept whole (it is settled)."""
        position = self._index.get(trial_id)
        return position is not None and self._spec_lens[position] >= 0

    def _count(self, trial_id: str) -> int:
        rows = self._results[trial_id]
        return rows.count if isinstance(rows, SpillRef) else len(rows)

    def changed(self, trial: TrialRuntime) -> None:
        """Look at ``trial`` at the next write: the loop handled an event for it."""
        self._looked_for.add(trial.id)

    def touch(self) -> None:
        self._dirty.set()

    def set_extras(self, build: Callable[[], dict[str, Any]]) -> None:
        """Have every write also store ``build()``'s fields in the head (plain JSON)."""
        self._extras = build

    def write_only_while(self, may_write: Callable[[], bool]) -> None:
        """Write only while ``may_write()`` (the driver holds the experiment's lease): a
        driver that lost it must not splice its writes into another driver's journal.
        What a refused write would have stored waits for the next allowed one."""
        self._may_write = may_write

    def urgent(self) -> None:
        """Write at once (after :data:`~orchestrator.journal.pace.URGENT_DELAY`), not at
        the next interval: a trial reached TERMINATED or ERROR, or settled a pause. A
        driver killed right after must not run it again, so its end (and every result
        before it) must be in storage at once. Requests that come together share one write."""
        self._pace.urgent()
        self._dirty.set()

    def soon(self) -> None:
        """Have the state as it is now in storage within
        :data:`~orchestrator.journal.pace.DURABLE_WITHIN_S`, however long the interval or
        the pause after a costly write: a checkpoint persisted, and a driver killed later
        must resume its trial from there, not from the one before. Requests within one
        write's time share it, so a stream of checkpoints costs no more writes than the
        interval's pace would at the default settings."""
        self._pace.soon()
        self._dirty.set()

    # -- writing ----------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._writer(), name="journal")

    async def aclose(self) -> None:
        """Stop the writer after one last write of the current state."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.flush()

    def after_next_write(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` once the state as it is now is in storage.

        Deleting a trial's older checkpoints waits for this: until the journal lists the
        newer ones, a driver that dies and resumes can only use the ones it lists, and
        they must still be there.
        """
        self._after_write.append(fn)
        self._dirty.set()

    async def flush(self) -> None:
        """Write the state as it is now; a write already under way ends first."""
        async with self._one_write:
            await self._write_now()

    async def _write_now(self) -> None:
        began = self._pace.capturing()
        if self._may_write is not None and not self._may_write():
            self._pace.ended(began)  # nothing to hurry: wait for the lease at the usual pace
            return
        self._dirty.clear()
        waiting, self._after_write = self._after_write, []
        cpu = time.thread_time()
        unstored = self._unstored
        write = self._capture()
        self._cut = {}
        cpu = time.thread_time() - cpu
        key = None
        if write.rows:  # a name never used before: no listed segment is ever replaced
            key = f"{SEGMENTS_PREFIX}/{self._token}-{self._next_segment:06d}.jsonl"
            self._next_segment += 1
        listed = ([] if write.compact else list(self._segments)) + ([key] if key else [])
        written = False
        swept: bool | None = None  # once recorded: whether sealed objects were merged
        try:
            # Building the segment is O(its rows), a base's O(all results): off the
            # loop, from the copies taken on it (results recorded meanwhile go into the
            # next write).
            built = await asyncio.to_thread(build_timed, write, listed, self._retirement.spill)
            segment, head, built_cpu = built.segment, built.head, built.cpu
            stored = time.monotonic()
            await self._write_objects(key, write.sealed_key, built)
            if self._may_write is not None and not self._may_write():
                raise JournalError("the experiment's lease is not held")  # keep the old head
            await self._write_head(head)
            self._pace.wrote(began, cpu + built_cpu, time.monotonic() - stored)
            written = True
            self.writes += 1
            self.bytes_written += len(segment) + len(built.sealed) + 2 * len(head)
            self.head_bytes = len(head)
            swept = self._committed(write, listed, len(segment), built)
        except Exception as err:  # storage outage: keep going, the next write catches up
            self.failed_writes += 1
            self._dirty.set()
            log.warning("could not write the experiment journal (will retry): %s", err)
        finally:
            self._pace.ended(time.monotonic())
            if not written:  # failed or cancelled: they wait for the next write
                self._after_write[:0] = waiting
                self._unstored |= unstored  # and so do the rows it did not store
                self._looked_for.update(write.ended)  # and the trials it would spill
            if swept is None:  # not recorded: the trials it sealed wait for the next one
                self._sealed.failed(write)
        if written:
            for fn in waiting:
                try:
                    fn()
                except Exception:  # one bad callback must not stop the others
                    log.exception("after a journal write")
            if swept is None:  # stored, but not recorded: delete nothing it may list
                return
            if write.compact:
                await self._delete_unlisted(SEGMENTS_PREFIX, set(self._segments))
            if write.compact or swept:
                await self._delete_unlisted(SEALED_PREFIX, {o.key for o in self._sealed.listed})

    async def _write_objects(
        self, segment_key: str | None, sealed_key: str | None, built: Built
    ) -> None:
        """The segment and the sealed object, side by side, each under a name never used
        before, both stored before the head that lists them (a crash in between leaves
        an unlisted object, deleted after a later compaction or merge, and by ``repair``)."""
        writes = []
        if segment_key is not None:
            writes.append(self._storage.write_bytes(segment_key, built.segment))
        if sealed_key is not None:
            writes.append(self._storage.write_bytes(sealed_key, built.sealed))
        for outcome in await asyncio.gather(*writes, return_exceptions=True):
            if isinstance(outcome, BaseException):
                raise outcome

    async def _write_head(self, head: bytes) -> None:
        """The head and its backup, side by side (a write costs one storage round trip,
        not two). Both land before anything the head supersedes is deleted (segments,
        checkpoints), so either one, alone, names only what is still there."""
        stored = await asyncio.gather(
            self._storage.write_bytes(JOURNAL_KEY, head),
            self._storage.write_bytes(BACKUP_KEY, head),
            return_exceptions=True,
        )
        for outcome in stored:
            if isinstance(outcome, BaseException):
                raise outcome

    def _committed(self, write: Write, listed: list[str], size: int, built: Built) -> bool:
        """Record that the head in storage now lists ``listed`` and the write's sealed
        objects; True when it no longer lists some it listed before (merged)."""
        self._segments = listed
        merged = self._sealed.committed(write, built)
        if write.compact:
            self._base_bytes, self._tail_bytes = size, 0
        else:
            self._tail_bytes += size
        for trial_id, start, rows in write.rows:
            count = rows.count if isinstance(rows, SpillRef) else len(rows)
            self._stored[trial_id] = min(start + count, self._cut.get(trial_id, 1 << 62))
        # Ended trials' results and records out of memory (``journal/retirement.py``).
        sealed = self._retirement.retire(write.ended, self._trials, self._results, self._stored)
        for trial_id in sealed:  # its part of the head leaves memory too
            position = self._index[trial_id]
            text = self._texts[position]
            if text is not None and self._spec_lens[position] >= 0:
                where = self._retirement.keep_head(text)
                self._text_at[position], self._text_len[position] = where
                self._texts[position] = None
                self._live.discard(position)
                self._sealed.wait(position)  # into the next write's sealed object
        return merged

    async def _delete_unlisted(self, prefix: str, listed: set[str]) -> None:
        """After a new base (or a merge of sealed objects): delete every object under
        ``prefix`` the head does not list (the ones it replaced, and any an earlier
        driver or an interrupted write left)."""
        try:
            for key in await self._storage.list(prefix):
                if key not in listed:
                    await self._storage.delete(key)
        except Exception as err:  # left for the next base
            log.warning("could not delete old journal objects (will retry): %s", err)

    async def _writer(self) -> None:
        while True:
            await self._dirty.wait()
            await self._pace.rest()
            # Shielded: closing cancels the writer, and a write under way (its deletions
            # of what its new base replaced included) ends first; aclose()'s own write
            # waits for it.
            await asyncio.shield(self.flush())

    def _capture(self) -> Write:
        """The head's parts and the rows a write must store, from the state as it is."""
        compact = (
            not self._segments
            or len(self._segments) >= COMPACT_AFTER
            or self._tail_bytes > self._base_bytes
        )
        header: dict[str, Any] = {
            "format": FORMAT_VERSION,
            "name": self._name,
            "started_at": self.started_at,
            "written_at": time.time(),
        }
        if self._extras is not None:
            header.update(self._extras())
        looked_for, self._looked_for = self._looked_for, set()
        unstored, self._unstored = self._unstored, set()
        count = self._count
        texts, index = self._texts, self._index
        ended: list[str] = []
        # The unsettled trials and those the loop changed; every other part is as it
        # was built last (settled, and nothing happened to the trial since).
        todo = [t for t in looked_for.union(self._specs) if t in index]
        for trial_id in sorted(todo, key=index.__getitem__):  # in the trials' order
            trial = self._trials[trial_id]
            position = index[trial_id]
            if texts[position] is None:  # sealed: a live part again
                self._live.add(position)
                if self._sealed.comes_back(position):
                    # From a sealed object: its part overrides the sealed copy, and its
                    # rows are written again from the first (its lines in the segments
                    # are older than the copy, which readers take instead).
                    self._stored[trial_id] = 0
                    unstored.add(trial_id)
            texts[position] = self._trial_head(trial_id, trial, count(trial_id))
            if trial.state.is_terminal:
                ended.append(trial_id)
        live = sorted(self._live)  # not every trial the experiment had: the live ones
        heads = [part for p in live if (part := texts[p]) is not None]
        write = Write({}, [], [], compact, [], heads_file=self._retirement.heads)
        where = (self._text_at, self._text_len)
        self._sealed.plan_write(write, texts, where, self._ids, self._results)
        rows: list[tuple[str, int, list[str] | SpillRef]] = []
        # A new base holds the live trials' rows: a sealed one's are in its object.
        for trial_id in [self._ids[p] for p in live] if compact else sorted(unstored):
            results = self._results[trial_id]
            start = 0 if compact else self._stored[trial_id]
            if isinstance(results, SpillRef):
                if start < results.count:  # a new base: every result, read back
                    rows.append((trial_id, 0, results))
            elif start < len(results):
                rows.append((trial_id, start, results[start:]))
        write.header, write.heads, write.rows, write.ended = header, heads, rows, ended
        write.trim = self._retirement.trim_due()
        return write

    def _trial_head(self, trial_id: str, trial: TrialRuntime, count: int) -> str:
        """The trial's part of the head, built afresh. A settled trial's is kept, and
        reused by the writes that do not look at it (:meth:`_capture`: only the trials
        the loop changed are looked at), so a write serialises the trials that changed,
        not every trial the experiment ever had (issue 36: at 4,000 trivial trials this
        was 80% of the journal's CPU). Only the head is kept, not what it was built
        from: the loop's word (:meth:`changed`) says when to build it again."""
        machine = trial.machine
        events = trial.events
        position = self._index[trial_id]
        spec_len = self._spec_lens[position]
        kept = self._texts[position]
        if kept is None:  # a sealed trial's, in the heads file: read back, for good
            at, self._text_at[position] = self._text_at[position], -1
            kept = self._retirement.head_part(at, self._text_len[position])
        if spec_len >= 0:  # kept: built again from its spec, the start of the kept head
            self._specs[trial_id] = kept[:spec_len]
            self._spec_lens[position] = -1
        changing: dict[str, Any] = {
            "id": trial_id,
            "at": position,  # its place in the trials' order, sealed or not
            "state": machine.state.value,
            "iteration": machine.iteration,
            "num_failures": machine.num_failures,
            "error": str(machine.error) if machine.error is not None else None,
            "checkpoints": [c.to_dict() for c in machine.checkpoints],
            "origin": machine.origin.to_dict() if machine.origin is not None else None,
            "last_result": trial.last_result,
            "results_count": count,
        }
        if machine.storage_down:  # paused because a checkpoint could not be stored
            changing["save_failed"] = True
        if events:
            changing["events"] = events
        if trial.config_pickle is not None:  # an exploit gave it a new config
            changing["config_now"] = trial.config
            changing["config_now_pickle"] = trial.config_pickle
        spec = self._specs[trial_id]
        head = spec + dumps(changing)[1:]
        if machine.state.is_settled:  # the head holds the spec: not kept twice
            self._spec_lens[position] = len(spec)
            del self._specs[trial_id]
        return head
