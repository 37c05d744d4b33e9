"""Checkpoint garbage collection, off the loop's critical path.

The state machine decides *which* checkpoints may go (only once a newer one is
persisted, or once it is on no trial's timeline); this worker does the deleting in
the background, with bounded concurrency. A delete of a checkpoint that some restore
or some trial's timeline still uses (``is_pinned``) is postponed, and at exit such a
checkpoint is kept; a failed delete is retried later with back-off and never fails a
trial. A checkpoint asked for twice is deleted once.
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
from orchestrator.engine.ray_calls import RAY, RayBackend

log = logging.getLogger("orchestrator.gc")


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

    def submit(self, checkpoints: tuple[Checkpoint, ...]) -> None:
        for ckpt in checkpoints:
            if ckpt.key in self._queued:
                continue
            self._queued.add(ckpt.key)
            task = asyncio.get_running_loop().create_task(self._delete(ckpt))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(functools.partial(self._done, ckpt.key))

    def sweep_blobs(self) -> None:
        """Sweep, in the background, the checkpoint blobs no checkpoint holds (what a
        crash mid-save or mid-delete left): a resumed run's start, under its lease.
        :meth:`drain` waits for it; a failure is logged (``repair`` sweeps too)."""
        task = asyncio.get_running_loop().create_task(self._sweep_blobs())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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
