"""The worker threads plain (sync) hooks run in: daemon threads, so a hook that blocks
never holds the process at exit.

A ``ThreadPoolExecutor``'s threads are joined when the interpreter exits: after Ctrl-C
the orchestrator closed and said so in a second, and then the process waited 90 s more
for a user's hook that was sleeping. A running Python thread cannot be stopped, so the
hook runner gives such a call a short grace when it closes and then abandons it, saying
so (:meth:`~orchestrator.engine.hooks.HookRunner.aclose`); these threads then end with
the process instead of keeping it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["HookThreads"]


class HookThreads(Executor):
    """Up to ``size`` daemon threads taking calls from one queue, in submission order; a
    thread is started only when no idle one can take the call."""

    def __init__(self, size: int, name: str) -> None:
        self._size = size
        self._name = name
        self._calls: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = (
            queue.SimpleQueue()
        )
        self._idle = threading.Semaphore(0)  # one per thread waiting for a call
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._calls.put((future, lambda: fn(*args, **kwargs)))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._size:
                thread = threading.Thread(
                    target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True
                )
                thread.start()
                self._threads.append(thread)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No more calls; queued ones are cancelled with ``cancel_futures``. ``wait``
        waits for the threads only when no call runs past it: a blocked hook's thread
        is left to end with the process."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        if cancel_futures:
            while True:
                try:
                    item = self._calls.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in threads:
            self._calls.put(None)
        if wait:
            for thread in threads:
                thread.join()

    def _work(self) -> None:
        while True:
            item = self._calls.get()
            if item is None:
                return
            future, call = item
            del item
            if future.set_running_or_notify_cancel():
                try:
                    result = call()
                except BaseException as err:
                    future.set_exception(err)
                else:
                    future.set_result(result)
            del future, call
            self._idle.release()
