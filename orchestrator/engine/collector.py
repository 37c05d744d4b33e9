"""Checkpoint garbage collection, off the loop's critical path.

The state machine decides *which* checkpoints may go (only once a newer one is
persisted, or once it is on no trial's timeline); this worker does the deleting in
the background, with bounded concurrency. A delete of a checkpoint that some restore
or some trial's timeline still uses (``is_pinned``) is postponed, and at exit such a
checkpoint is kept; a failed delete is retried later with back-off and never fails a
trial. A checkpoint asked for twice is deleted once.

On a content-addressed store (S3, GCS) a checkpoint's manifest names shared blobs:
after the manifest, the blobs no kept checkpoint names any more go too (counted in
:class:`~orchestrator.engine.blob_refs.BlobRefs`, the driver's alone). A save whose
manifest names a blob deleted while it ran is checked here before it counts
(:meth:`CheckpointCollector.check_save`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from orchestrator.core.backoff import Backoff
from orchestrator.core.checkpoints import Checkpoint
from orchestrator.core.settings import StorageMode
from orchestrator.engine.blob_refs import BlobRefs
from orchestrator.engine.ray_calls import RAY, RayBackend
from orchestrator.errors import BlobCollected

log = logging.getLogger("orchestrator.gc")

#: How long a blob's deletion waits for a moment with no save under way (then it waits
#: only for the saves that started before the blob was doomed).
QUIET_WAIT_S = 60.0
_POLL_S = 0.05


@dataclass(frozen=True)
class CollectorStatistics:
    deleted: int
    failed_attempts: int
    pending: int


class CheckpointCollector:
    def __init__(
        self,
        storage: Any,
        *,
        is_pinned: Callable[[str], bool] = lambda key: False,
        delete: Callable[[Checkpoint], Awaitable[None]] | None = None,
        concurrency: int = 4,
        max_attempts: int = 8,
        retry_delay: float = 0.5,
    ) -> None:
        self._storage = storage
        self._is_pinned = is_pinned
        self._delete_one = delete or self._delete_from_storage
        self._slots = asyncio.Semaphore(concurrency)
        self._max_attempts = max_attempts
        self._retry_delay = retry_delay
        self._tasks: set[asyncio.Task[None]] = set()
        self._queued: set[str] = set()  # keys with a delete under way
        self._draining = False
        self._deleted = 0
        self._failed = 0
        self.refs = BlobRefs()
        # Blob deletions under way: blob -> done when its deletion is over.
        self._blob_deletions: dict[str, asyncio.Future[None]] = {}

    def submit(self, checkpoints: tuple[Checkpoint, ...]) -> None:
        for ckpt in checkpoints:
            if ckpt.key in self._queued:
                continue
            self._queued.add(ckpt.key)
            task = asyncio.get_running_loop().create_task(self._delete(ckpt))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(functools.partial(self._done, ckpt.key))

    async def _sweep_blobs(self) -> None:
        try:
            await self._storage.sweep_blobs()
        except Exception as err:
            log.warning(
                "sweeping the unheld checkpoint blobs of %s failed: %s (the next resume or "
                "`python -m orchestrator repair` sweeps them)",
                self._storage.uri,
                err,
            )

    def _done(self, key: str, task: asyncio.Task[None]) -> None:
        self._queued.discard(key)

    async def drain(self) -> None:
        """Finish the deletes under way; those waiting for a pin keep their checkpoint
        (nothing will unpin it any more)."""
        self._draining = True
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def statistics(self) -> CollectorStatistics:
        return CollectorStatistics(self._deleted, self._failed, len(self._tasks))

    async def _delete_from_storage(self, ckpt: Checkpoint) -> None:
        await self._storage.delete_checkpoint(ckpt.key)

    async def _delete(self, ckpt: Checkpoint) -> None:
        backoff = Backoff(self._retry_delay, 30.0, jitter="half")
        attempt = 0
        while True:
            if self._is_pinned(ckpt.key):  # a restore or a timeline uses it: wait
                if self._draining:
                    log.info(
                        "checkpoint %s of trial %s is kept: a trial's timeline still uses it",
                        ckpt.uri,
                        ckpt.trial_id,
                    )
                    return
                await asyncio.sleep(self._retry_delay)
                continue
            try:
                async with self._slots:
                    await self._delete_one(ckpt)
                self._deleted += 1
                dead = self.refs.release(ckpt.key, ckpt.manifest)
                if dead:
                    await self._delete_blobs(dead, f"checkpoint {ckpt.uri}")
                return
            except Exception as err:  # never fails a trial: log, back off, retry
                attempt += 1
                self._failed += 1
                log.warning(
                    "deleting checkpoint %s of trial %s failed (attempt %d/%d): %s",
                    ckpt.uri,
                    ckpt.trial_id,
                    attempt,
                    self._max_attempts,
                    err,
                )
                if attempt >= self._max_attempts:
                    log.error(
                        "gave up deleting checkpoint %s of trial %s; delete it by hand if it "
                        "is not needed",
                        ckpt.uri,
                        ckpt.trial_id,
                    )
                    return
            await asyncio.sleep(backoff.delay(attempt))

    async def _delete_blobs(self, dead: frozenset[str], of: str) -> None:
        """Delete blobs no kept checkpoint names (:meth:`BlobRefs.release` chose them
        and marked them as being deleted), once the saves that may name them are over
        (see :mod:`orchestrator.engine.blob_refs`): those that do hold them again, and
        they stay. A failure leaves orphans, which the next run's sweep (or ``repair``)
        removes: never fails a trial."""
        await self._saves_over(self.refs.now())
        gone = self.refs.begin_delete(dead)
        if not gone:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for sha in gone:
            self._blob_deletions[sha] = done
        try:
            async with self._slots:
                await self._storage.delete_blobs(gone)
        except Exception as err:
            log.warning(
                "deleting %d blob(s) of %s failed (left for a sweep): %s", len(dead), of, err
            )
        finally:
            self.refs.deleted(gone)
            for sha in gone:
                if self._blob_deletions.get(sha) is done:
                    del self._blob_deletions[sha]
            done.set_result(None)

    def hold(self, checkpoints: Any) -> None:
        """Count the blobs of checkpoints a resumed run keeps (from its journal), before
        any collection: none of them may go while one of these names them."""
        for ckpt in checkpoints:
            self.refs.hold(ckpt.key, ckpt.manifest)

    def start_sweep(self) -> None:
        """At a resumed run's start, under its lease: sweep, in the background (waited
        for by :meth:`drain`; a failure is logged, ``repair`` sweeps too), the blobs a
        crash mid-save or mid-delete left that no checkpoint holds. On S3/GCS
        :meth:`sweep_orphans`, after the deletes already submitted (their blobs are
        orphans once they are done); on a local disk the blobs with one link left
        (``LocalStorage.sweep_blobs``)."""
        before = list(self._tasks)

        async def sweep() -> None:
            if not self._storage.content_addressed:
                await self._sweep_blobs()
                return
            await asyncio.gather(*before, return_exceptions=True)
            await self.sweep_orphans()

        task = asyncio.get_running_loop().create_task(sweep())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _saves_over(self, doomed_at: int) -> None:
        """Wait for a moment with no save under way, for :data:`QUIET_WAIT_S` at most,
        and at least until the saves that started before ``doomed_at`` are over."""
        waited = 0.0
        while self.refs.saves_in_flight() and waited < QUIET_WAIT_S:
            await asyncio.sleep(_POLL_S)
            waited += _POLL_S
        while True:  # polled: saves end on the loop, and rarely is one waited for
            if not self.refs.saves_in_flight(started_before=doomed_at):
                return
            await asyncio.sleep(_POLL_S)

    async def sweep_orphans(self) -> None:
        """Delete the blobs no committed checkpoint names (left by a crash between a
        save's uploads and its manifest, or in the middle of a collection): at a resumed
        run's start. A save in flight meanwhile is waited for (see :meth:`_delete_blobs`):
        the blobs it commits are held again, and stay."""
        try:
            async with self._slots:
                orphans = await self._storage.orphan_blobs(keep=self.refs.held())
            if not orphans:
                return
            await self._delete_blobs(frozenset(orphans), "no checkpoint")
            log.info("deleted %d blob(s) that no checkpoint names", len(orphans))
        except Exception as err:
            log.warning("sweeping blobs that no checkpoint names failed: %s", err)

    async def check_save(self, key: str, manifest: Any, suspects: frozenset[str]) -> Any:
        """The committed ``manifest`` of the save ``key`` names ``suspects``, blobs
        deleted while it ran: once those deletions are over, return the manifest if all
        of them are stored, else drop the checkpoint and raise :class:`BlobCollected`
        (only this save is lost)."""
        waits = {self._blob_deletions[sha] for sha in suspects if sha in self._blob_deletions}
        if waits:
            await asyncio.gather(*waits)
        for sha in sorted(suspects):
            if not await self._storage.has_blob(sha):
                await self._storage.delete_checkpoint(key)
                raise BlobCollected(
                    f"checkpoint {self._storage.uri}/{key} reused blob {sha[:12]}... of an "
                    "earlier checkpoint, which checkpoint garbage collection deleted while "
                    "the save ran: this checkpoint is dropped, the older ones stay, and the "
                    "trial saves again at its next checkpoint"
                )
        return manifest


def delete_where_visible_fn(
    store: Any, mode: StorageMode, backend: RayBackend = RAY
) -> Callable[[Checkpoint], Awaitable[None]]:
    """The collector's delete: with local storage the nodes may not share, a checkpoint
    is deleted where it is visible (here, or on a live node of ``backend`` that sees it),
    and one that no live node sees is dropped with one log line (there is nothing a
    retry could do)."""
    root = store.uri

    async def delete(ckpt: Checkpoint) -> None:
        if mode is not StorageMode.LOCAL or ckpt.path is None:
            await store.delete_checkpoint(ckpt.key)
            return
        from orchestrator.actor.locality import is_visible

        manifest = dict(ckpt.manifest) if ckpt.manifest is not None else None
        if await asyncio.to_thread(is_visible, ckpt.path, manifest):
            await store.delete_checkpoint(ckpt.key)
        elif not await backend.delete_where_visible(root, ckpt):
            log.info(
                "trial %s: checkpoint %s is visible from no live node; dropped from the "
                "books (delete it by hand if a disk that holds it comes back)",
                ckpt.trial_id,
                ckpt.uri,
            )

    return delete
