"""The flusher: the one task that moves queued operations from the event loop to the
files, in one worker thread, and the changed files to storage.

It starts lazily on the first :meth:`Flusher.push` (a loop is running then), wakes
every ``flush_interval`` seconds or as soon as ``max_pending`` results wait, and stops
in :meth:`Flusher.aclose`, which writes, uploads and closes everything. Results are
queued by reference (they are held by the trial anyway), so ``max_pending`` bounds the
size of a batch and the delay before it is written, not memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from orchestrator.core.trial_logs import ABANDONED_FILE
from orchestrator.timeouts import within
from orchestrator.views.loggers.files import write_atomic
from orchestrator.views.loggers.log_sink import LogSink
from orchestrator.views.loggers.ops import Op

__all__ = ["Flusher"]

log = logging.getLogger("orchestrator.views.loggers")

T = TypeVar("T")

_UPLOAD_CONCURRENCY = 8


class Flusher:
    def __init__(
        self,
        sink: LogSink,
        *,
        storage: Any,
        flush_interval: float,
        upload_interval: float,
        max_pending: int,
    ) -> None:
        self._sink = sink
        self._storage = storage
        sink.track_changes = storage is not None  # no uploads: no list of what changed
        self._flush_interval = flush_interval
        self._upload_interval = upload_interval
        self._max_pending = max_pending
        self._pending: dict[str, list[Op]] = {}
        self.pending_results = 0
        self.flushes = self.uploads = 0
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._last_upload = -math.inf
        self._upload_failed: set[str] = set()
        self._merged: set[str] = set()  # abandoned-rows files merged with the stored one
        self.may_write: Callable[[], bool] | None = None

    def push(self, trial_id: str, op: Op, *, result: bool = False) -> None:
        """Queue ``op`` behind the trial's earlier operations. O(1), no I/O."""
        ops = self._pending.get(trial_id)
        if ops is None:
            ops = self._pending[trial_id] = []
        ops.append(op)
        if result:
            self.pending_results += 1
            if self.pending_results >= self._max_pending:
                self._wake.set()
        if self._task is None:
            self._start()

    async def flush(self) -> None:
        """Write everything queued so far and upload every changed file now."""
        self._bind()
        await self._cycle(upload=True)

    async def aclose(self) -> None:
        """Write, upload and close everything, and stop the task. Cancelling it loses
        nothing: a batch handed to the thread is written, the rest stays queued."""
        self._closing = True
        task = self._task
        self._bind()
        try:
            if task is not None:
                self._wake.set()
                await asyncio.wait({task})  # a cancelled aclose does not cancel it
                if self._task is task:
                    self._task = None
            while True:
                await self._cycle(upload=True, close=True)
                if not self._pending:
                    break
        finally:
            self._closing = False
        if self._executor is not None:  # idle now: its last job was awaited
            self._executor.shutdown(wait=False)
            self._executor = None

    # -- the task ---------------------------------------------------------------------

    def _start(self) -> None:
        if self._closing:
            return  # aclose's final flush picks the new operations up
        self._bind()
        task = asyncio.get_running_loop().create_task(self._run(), name="loggers:flush")
        task.add_done_callback(self._finished)
        self._task = task

    def _finished(self, task: asyncio.Task[None]) -> None:
        if self._task is task:
            self._task = None
        if not task.cancelled() and task.exception() is not None:
            log.error("the experiment logger's flusher failed", exc_info=task.exception())

    def _bind(self) -> None:
        """asyncio primitives belong to one loop; a logger reused under a new loop
        (a second ``asyncio.run``) gets new ones."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._wake, self._lock = loop, asyncio.Event(), asyncio.Lock()

    async def _run(self) -> None:
        try:
            while not self._closing:
                with contextlib.suppress(TimeoutError):
                    await within(self._flush_interval, self._wake.wait())
                self._wake.clear()
                if not self._closing:
                    await self._cycle(upload=False)
        except asyncio.CancelledError:
            self._write_now()
            raise

    def _write_now(self) -> None:
        """Nobody cancels this task but a loop being torn down (``asyncio.run``
        ending without ``aclose``): write what is queued and close the files, blocking,
        since no later flush will come (uploads need the loop, so none are made)."""
        try:
            if self._executor is not None:
                self._executor.shutdown(wait=True)  # a batch may still be in the thread
                self._executor = None
            batch, self._pending, self.pending_results = self._pending, {}, 0
            self._sink.apply(batch, close=True)
        except Exception:
            log.exception("the experiment logger could not write its last batch")

    async def _cycle(self, *, upload: bool, close: bool = False) -> None:
        async with self._lock:
            if self.may_write is not None and not self.may_write():
                if close:  # nobody writes them later: drop them, close the files
                    if self.pending_results:
                        log.warning(
                            "%d result(s) not logged: the experiment's lease is not held",
                            self.pending_results,
                        )
                    self._pending, self.pending_results = {}, 0
                    await self._in_thread(self._sink.apply, {}, close=True)
                return
            batch, self._pending, self.pending_results = self._pending, {}, 0
            try:
                if batch or close:
                    await self._in_thread(self._sink.apply, batch, close=close)
                    self.flushes += 1
            except Exception:
                log.exception("the experiment logger could not write a batch")
            if self._storage is not None:
                now = asyncio.get_running_loop().time()
                if upload or now - self._last_upload >= self._upload_interval:
                    self._last_upload = now
                    await self._upload()

    async def _upload(self) -> None:
        try:
            changed = await self._in_thread(self._sink.take_changed)
        except Exception:
            log.exception("the experiment logger could not list its changed files")
            return
        limit = asyncio.Semaphore(_UPLOAD_CONCURRENCY)

        async def one(key: str, path: Path) -> None:
            async with limit:
                try:
                    if key.endswith(f"/{ABANDONED_FILE}") and key not in self._merged:
                        await self._merge_earlier(key, path)
                    data = await self._in_thread(_read, path)
                    if data is not None:
                        await self._storage.write_bytes(key, data)
                        self.uploads += 1
                except Exception as err:
                    self._sink.mark_changed(key)
                    self._upload_failure(key, err)

        await asyncio.gather(*(one(key, path) for key, path in changed))

    async def _merge_earlier(self, key: str, path: Path) -> None:
        """Put the rows an earlier session abandoned first in the local
        ``result.abandoned.json`` (it starts empty on this driver's disk, and its upload
        replaces the stored one), once per file; a failure leaves the upload for the
        next round."""
        from storage import NotFound

        try:
            earlier = await self._storage.read_bytes(key)
        except NotFound:
            earlier = b""
        if earlier:
            await self._in_thread(_prepend, path, earlier)
        self._merged.add(key)

    def _upload_failure(self, key: str, err: Exception) -> None:
        prefix = key.partition("/")[0]
        if prefix in self._upload_failed:
            return
        self._upload_failed.add(prefix)
        log.warning(
            "could not upload %s (%s: %s); retrying at the next upload, later failures "
            "for %s are not logged",
            key,
            type(err).__name__,
            err,
            prefix,
        )

    async def _in_thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="loggers")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))


def _prepend(path: Path, data: bytes) -> None:
    write_atomic(path, data + path.read_bytes())


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
