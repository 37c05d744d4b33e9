"""Writing one received file: large files with O_DIRECT, small ones through the cache.

Why O_DIRECT: measured on this kind of machine, buffered writes of 1 GiB cost 0.2 to
2.8 s of CPU and 1.3 to 20 s of wall time depending on how much dirty page cache the
machine already holds (writeback throttling), while O_DIRECT writes from an aligned
buffer cost 0.07 s of CPU and a steady ~1 s. A checkpoint being received is not read
back by the writer, so the page cache buys nothing here. Bytes are gathered into a
page-aligned buffer (one cheap memcpy from the object store's view), written in whole
aligned blocks by a background thread while the next bytes are hashed and gathered
(double buffering), and the padded tail is trimmed with ``ftruncate``. Filesystems
that refuse O_DIRECT (tmpfs) fall back to plain writes.
"""

from __future__ import annotations

import errno
import mmap
import os
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["DIRECT_MIN_SIZE", "FileWriter"]

#: Files smaller than this are written through the page cache: one synchronous device
#: write per small file would cost more than the cache.
DIRECT_MIN_SIZE = 4 * 1024 * 1024
_BLOCK = 4096
_BUF = 8 * 1024 * 1024
_O_DIRECT = getattr(os, "O_DIRECT", 0)


class FileWriter:
    """Writes the files of one copy, one at a time, sequentially. Not thread-safe."""

    def __init__(self) -> None:
        self._direct_ok = _O_DIRECT != 0
        self._bufs = [mmap.mmap(-1, _BUF), mmap.mmap(-1, _BUF)]
        self._views = [memoryview(b) for b in self._bufs]
        self._cur = 0
        self._fill = 0
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="transfer-write")
        self._pending: Future[None] | None = None
        self._fd = -1
        self._direct = False
        self._size = 0

    def open(self, path: str, flags: int, size: int) -> int:
        """Open ``path`` (``flags`` from the caller, never following links) for a file of
        ``size`` bytes and return the fd, for metadata calls by the caller."""
        self._direct = False
        if self._direct_ok and size >= DIRECT_MIN_SIZE:
            try:
                self._fd = os.open(path, flags | _O_DIRECT, 0o600)
                self._direct = True
            except OSError as err:
                if err.errno != errno.EINVAL:
                    raise
                self._direct_ok = False
        if not self._direct:
            self._fd = os.open(path, flags, 0o600)
        self._size = size
        self._fill = 0
        return self._fd

    def write(self, data: memoryview) -> None:
        if not self._direct:
            _write_all(self._fd, data)
            return
        while data.nbytes:
            view = self._views[self._cur]
            n = min(_BUF - self._fill, data.nbytes)
            view[self._fill : self._fill + n] = data[:n]
            self._fill += n
            data = data[n:]
            if self._fill == _BUF:
                self._submit(_BUF)

    def _submit(self, nbytes: int) -> None:
        self._wait()
        self._pending = self._pool.submit(_write_all, self._fd, self._views[self._cur][:nbytes])
        self._cur ^= 1
        self._fill = 0

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def finish(self) -> None:
        """Flush what is buffered; the fd stays open for the caller to close."""
        if self._direct:
            if self._fill:
                padded = -(-self._fill // _BLOCK) * _BLOCK
                self._views[self._cur][self._fill : padded] = bytes(padded - self._fill)
                self._submit(padded)
            self._wait()
            os.ftruncate(self._fd, self._size)

    def abandon(self) -> None:
        """Drop the current file's pending bytes (the caller removes the file)."""
        try:
            self._wait()
        except OSError:
            pass
        self._fill = 0

    def close(self) -> None:
        self.abandon()
        self._pool.shutdown(wait=True)
        for view in self._views:
            view.release()
        for buf in self._bufs:
            buf.close()


def _write_all(fd: int, data: memoryview) -> None:
    while data.nbytes:
        n = os.write(fd, data)
        data = data[n:]
