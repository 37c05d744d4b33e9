"""Writing the received files: big ones with O_DIRECT, straight from the buffers the
bytes arrived in and several writes at once; small ones through the page cache.

Why O_DIRECT: measured on this kind of machine, buffered writes of 1 GiB cost 0.2 to
2.8 s of CPU and 1.3 to 20 s of wall time depending on how much dirty page cache the
machine already holds (writeback throttling), while O_DIRECT writes from an aligned
buffer cost 0.07 s of CPU and a steady ~1 s. A checkpoint being received is not read
back by the writer, so the page cache buys nothing here.

Why straight from the receive buffer: frames arrive in page-aligned buffers with their
payload aligned and each big file's pieces starting a payload (:mod:`transfer.chunks`),
so a piece is written from where it was received, with no copy; only a file's last
partial block (< 4 KiB) goes through an aligned buffer. Bytes that arrive unaligned (the
object-store path, other chunk sizes) are gathered into aligned buffers first.

Why several writes at once into preallocated files: measured here, one 8 MiB write at a
time into a growing file ran at 0.6-1.0 GB/s, into a preallocated one at 1.0-1.3 GB/s,
two at a time at 1.2-1.4 GB/s; the disk takes more than one request at a time, and ext4
serialises direct writes that extend a file but not those into preallocated space.
Filesystems that refuse O_DIRECT (tmpfs) or preallocation get plain writes.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import queue
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from .chunks import ALIGN, BIG_FILE

__all__ = ["DIRECT_MIN_SIZE", "WRITE_DEPTH", "FileWriter", "OpenFile"]

#: Files smaller than this are written through the page cache: one synchronous device
#: write per small file would cost more than the cache.
DIRECT_MIN_SIZE = BIG_FILE
#: Writes in flight at once.
WRITE_DEPTH = 2
_BUF = 8 * 1024 * 1024  # one aligned gather buffer
_GATHER_BUFFERS = WRITE_DEPTH + 1
_O_DIRECT = getattr(os, "O_DIRECT", 0)


def _load_fallocate() -> Callable[[int, int, int, int], int] | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).fallocate
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


_fallocate = _load_fallocate()


def _address(view: memoryview) -> int:
    addr: int = np.frombuffer(view, dtype=np.uint8).__array_interface__["data"][0]
    return addr


class OpenFile:
    """One file being written: where its next bytes go and what is still in flight."""

    __slots__ = ("carry", "direct", "fd", "fill", "pending", "pos", "size")

    def __init__(self, fd: int, size: int, direct: bool) -> None:
        self.fd = fd
        self.size = size
        self.direct = direct
        self.pos = 0  # file offset of the next byte not yet handed to a write
        self.carry: memoryview | None = None  # aligned gather buffer (direct files)
        self.fill = 0  # bytes gathered in ``carry``, to be written at ``pos``
        self.pending: list[Future[None]] = []


class FileWriter:
    """Writes the files of one copy, each file's bytes handed over in order.

    ``write`` starts a big file's writes on a pool of ``WRITE_DEPTH`` threads and returns
    those that still read the caller's buffer: the caller keeps the buffer unchanged
    until they are done. Small files are written before ``write`` returns. ``finish``
    returns the step that completes a file (its writes waited for, its size set), which
    the staged tree runs before the file's fsync. Not thread-safe.
    """

    def __init__(self) -> None:
        self._direct_ok = _O_DIRECT != 0
        self._pool = ThreadPoolExecutor(WRITE_DEPTH, thread_name_prefix="transfer-write")
        self._free: queue.Queue[memoryview] = queue.Queue()
        self._maps: list[mmap.mmap] = []

    def open(self, path: str, flags: int, size: int) -> OpenFile:
        """Open ``path`` (``flags`` from the caller, never following links) for a file of
        ``size`` bytes; big files are opened for O_DIRECT and preallocated."""
        if self._direct_ok and size >= DIRECT_MIN_SIZE:
            try:
                fd = os.open(path, flags | _O_DIRECT, 0o600)
            except OSError as err:
                if err.errno != errno.EINVAL:
                    raise
                self._direct_ok = False
            else:
                _preallocate(fd, size)
                return OpenFile(fd, size, direct=True)
        return OpenFile(os.open(path, flags, 0o600), size, direct=False)

    def write(self, f: OpenFile, data: memoryview) -> list[Future[None]]:
        """Write ``data``, the file's next bytes; returns the writes that read ``data``."""
        if not f.direct:  # small: into the page cache at once, nothing left in flight
            _pwrite_all(f.fd, data, f.pos)
            f.pos += len(data)
            return []
        reading: list[Future[None]] = []
        if f.fill == 0 and f.pos % ALIGN == 0 and _address(data) % ALIGN == 0:
            whole = len(data) - len(data) % ALIGN
            if whole:
                reading = self._start(f, data[:whole], f.pos, whole)
                data = data[whole:]
        while len(data):
            if f.carry is None:
                f.carry = self._take_buffer()
            n = min(_BUF - f.fill, len(data))
            f.carry[f.fill : f.fill + n] = data[:n]
            f.fill += n
            data = data[n:]
            if f.fill == _BUF:
                self._flush(f, _BUF)
        return reading

    def finish(self, f: OpenFile) -> Callable[[int], None]:
        """All of ``f``'s bytes are handed over: start the last write and return what
        completes the file once the writes are done (run it before syncing the file)."""
        if f.fill:
            assert f.carry is not None
            padded = -(-f.fill // ALIGN) * ALIGN
            f.carry[f.fill : padded] = bytes(padded - f.fill)
            self._flush(f, padded)
        pending, size, direct = f.pending, f.size, f.direct
        f.pending = []

        def complete(fd: int) -> None:
            for fut in pending:
                fut.result()
            if direct:
                os.ftruncate(fd, size)  # drop the padding of the last block

        return complete

    def close(self) -> None:
        """Wait for the writes already running, drop the others; safe to call twice."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        while True:
            try:
                self._free.get_nowait().release()
            except queue.Empty:
                break
        for m in self._maps:
            try:
                m.close()
            except BufferError:  # a view is still held by an abandoned file
                pass
        self._maps.clear()

    def _start(self, f: OpenFile, data: memoryview, pos: int, n: int) -> list[Future[None]]:
        fut = self._pool.submit(_pwrite_all, f.fd, data, pos)
        f.pending.append(fut)
        f.pos = pos + n
        return [fut]

    def _flush(self, f: OpenFile, nbytes: int) -> None:
        assert f.carry is not None
        buf, f.carry = f.carry, None
        fut = self._pool.submit(_pwrite_all, f.fd, buf[:nbytes], f.pos)
        fut.add_done_callback(lambda _f: self._free.put(buf))
        f.pending.append(fut)
        f.pos += f.fill
        f.fill = 0

    def _take_buffer(self) -> memoryview:
        try:
            return self._free.get_nowait()
        except queue.Empty:
            if len(self._maps) < _GATHER_BUFFERS:
                self._maps.append(mmap.mmap(-1, _BUF))
                return memoryview(self._maps[-1])
        return self._free.get()  # the oldest write in flight returns one soon


def _preallocate(fd: int, size: int) -> None:
    """Reserve the file's blocks (ext4 then lets direct writes into them run at once)."""
    if _fallocate is not None and size > 0:
        _fallocate(fd, 0, 0, size)  # best effort: a filesystem without it writes as usual


def _pwrite_all(fd: int, data: memoryview, pos: int) -> None:
    while len(data):
        n = os.pwrite(fd, data, pos)
        data = data[n:]
        pos += n
