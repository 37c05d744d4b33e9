"""Bounded concurrency primitives shared by the drivers.

Two bounds keep a checkpoint upload's memory flat whatever its shape: a byte budget
(every buffered part or small file holds its size from the budget until its request
ends) and a cap on concurrently running file transfers. ``map_bounded`` owns its tasks:
the first failure or a cancellation cancels and awaits the rest, so nothing keeps
running unseen after the call returns.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import TypeVar

__all__ = ["ByteBudget", "in_thread", "map_bounded", "run_stoppable"]

T = TypeVar("T")
R = TypeVar("R")


class ByteBudget:
    """A FIFO semaphore counted in bytes. A request larger than the capacity is clipped
    to it (it then runs alone) rather than deadlocking."""

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self._used = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def used(self) -> int:
        return self._used

    async def acquire(self, nbytes: int) -> int:
        """Wait until ``nbytes`` fit; return the amount to pass to :meth:`release`."""
        n = max(1, min(nbytes, self.capacity))
        if not self._waiters and self._used + n <= self.capacity:
            self._used += n
            return n
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (n, fut)
        self._waiters.append(entry)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release(n)  # granted just as we were cancelled
            else:
                self._waiters.remove(entry)
                self._wake()
            raise
        return n

    def release(self, n: int) -> None:
        self._used -= n
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._used + self._waiters[0][0] <= self.capacity:
            n, fut = self._waiters.popleft()
            if fut.done():
                continue
            self._used += n
            fut.set_result(None)

    @asynccontextmanager
    async def hold(self, nbytes: int) -> AsyncIterator[None]:
        n = await self.acquire(nbytes)
        try:
            yield
        finally:
            self.release(n)


async def map_bounded(fn: Callable[[T], Awaitable[R]], items: Iterable[T], limit: int) -> list[R]:
    """``[await fn(x) for x in items]`` with at most ``limit`` running at once, results in
    input order. The first exception cancels the others and is raised once they have
    finished; cancelling the caller cancels them all the same way."""
    todo = list(items)
    results: list[R | None] = [None] * len(todo)
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < len(todo):
            i = next_index
            next_index += 1
            results[i] = await fn(todo[i])

    workers = [asyncio.ensure_future(worker()) for _ in range(max(1, min(limit, len(todo))))]
    try:
        done, pending = await asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    return results  # type: ignore[return-value]


async def run_stoppable(fn: Callable[[threading.Event], R]) -> R:
    """Run blocking ``fn(stop)`` in a worker thread. If the caller is cancelled, set
    ``stop`` and wait for the thread to notice before re-raising, so that a cancelled
    operation has really stopped touching the disk when its task ends (no temp file
    created after its cleanup ran)."""
    stop = threading.Event()
    fut = asyncio.ensure_future(asyncio.to_thread(fn, stop))
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        stop.set()
        await asyncio.gather(fut, return_exceptions=True)
        raise


async def in_thread(fn: Callable[..., R], *args: object) -> R:
    """``asyncio.to_thread`` that, when cancelled, still waits for the thread to finish
    before re-raising: the caller's cleanup then never races a write in progress."""
    fut = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        await asyncio.gather(fut, return_exceptions=True)
        raise
