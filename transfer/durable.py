"""Making a staged tree durable before it is swapped in.

A copy that returns has put every byte on the disk: each file is fsynced (its data and
its inode: size, mode, mtime), then every directory of the staged tree (the names in
it), and only then is the tree swapped in; after the swap the target's parent is
fsynced, so the swap itself survives a crash too. A machine that crashes at any point
leaves at the target either the old tree or the complete new one, never a tree that
looks complete but holds files the disk never got (what a crash within the kernel's
writeback delay, ~30 s, could leave before, when copies did not sync at all).

What it costs, and why it is done this way (measured on this kind of VM, quiet to
loaded):

* one fsync per file, one after another: 0.07-0.9 s for 96 files of 640 KiB, and
  0.6-6.5 s for 2,000 files of 4 KiB, each waiting for its own journal commit;
* the same fsyncs eight at a time (``Syncer``, this module): 0.06-0.16 s and
  0.27-0.7 s, since concurrent fsyncs share journal commits, and they run while the
  rest of the copy still streams, as soon as each file is complete;
* one ``syncfs`` of the filesystem: 0.02-0.12 s, as durable on Linux >= 5.8, but
  it also waits for every other writer's dirty data on that filesystem (another job's
  checkpoint, logs), so its cost is not bounded by the copy, and older kernels do not
  report its write errors: not used;
* no fsync: the fastest, and what a crash can break: not used.

Big files, written with O_DIRECT, are already on the device when their writes return;
their fsync only commits the metadata and flushes the device's cache (milliseconds).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["Syncer", "fsync_dir"]

#: Concurrent fsyncs: enough for the journal to batch them, few enough to stay cheap.
SYNC_THREADS = 8
#: Files handed over and not yet synced (each holds an open descriptor).
MAX_PENDING = 256


def fsync_dir(path: str) -> None:
    """Make the entries of directory ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Syncer:
    """fsyncs files in the background as they are handed over, a bounded number at once.

    ``submit`` takes ownership of a descriptor; the first failure is raised by the next
    ``submit`` or by ``wait``. ``close`` abandons what has not started (closing its
    descriptors) and waits for what has.
    """

    def __init__(self, threads: int = SYNC_THREADS, max_pending: int = MAX_PENDING) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="transfer-sync")
        self._slots = threading.BoundedSemaphore(max_pending)
        self._lock = threading.Lock()
        self._pending: dict[Future[None], int] = {}
        self._error: BaseException | None = None

    def submit(self, fd: int, before: Callable[[int], None] | None = None) -> None:
        """Own ``fd`` from now on: in the background run ``before(fd)`` (the writer's
        completion and the file's metadata), then fsync and close it. Blocks while
        ``max_pending`` files are waiting."""
        try:
            self.check()
            self._slots.acquire()
        except BaseException:
            os.close(fd)
            raise
        try:
            fut = self._pool.submit(_sync_file, fd, before)
        except BaseException:
            self._slots.release()
            os.close(fd)
            raise
        with self._lock:
            self._pending[fut] = fd
        fut.add_done_callback(self._done)

    def sync_dirs(self, paths: Iterable[str]) -> None:
        """fsync every directory in ``paths``, several at once; raises the first error."""
        futures = [self._pool.submit(fsync_dir, p) for p in paths]
        for fut in futures:
            fut.result()

    def check(self) -> None:
        """Raise the first failure of a file handed over so far."""
        if self._error is not None:
            raise self._error

    def wait(self) -> None:
        """Return once every file handed over is durable; raise the first failure."""
        with self._lock:
            pending = list(self._pending)
        for fut in pending:
            fut.result()  # raises its failure (its callback may not have recorded it yet)
        self.check()

    def close(self) -> None:
        """Abandon the files not synced yet; safe to call twice."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            leftover = [fd for fut, fd in self._pending.items() if fut.cancelled()]
            self._pending.clear()
        for fd in leftover:
            os.close(fd)

    def _done(self, fut: Future[None]) -> None:
        if fut.cancelled():
            return  # its descriptor is closed by close()
        with self._lock:
            self._pending.pop(fut, None)
        self._slots.release()
        err = fut.exception()
        if err is not None and self._error is None:
            self._error = err


def _sync_file(fd: int, before: Callable[[int], None] | None) -> None:
    try:
        if before is not None:
            before(fd)
        os.fsync(fd)
    finally:
        os.close(fd)
