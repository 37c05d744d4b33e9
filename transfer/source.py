"""The reading end, used by tasks pinned to the source node (see :mod:`transfer.tasks`).

It reads each chunk straight into a frame buffer (``preadv``, no intermediate bytes
objects) and computes each file's transit check (:mod:`transfer.checksum`) while the
bytes are hot in cache; the buffer is reused for a later chunk, so the reader's memory
is a few frames whatever the directory's size. Chunks must be read in layout order,
which is what lets a file's check be computed in a single streaming pass.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from .checksum import CHECK_SIZE, digest_file, new_check
from .chunks import ChunkSpec, encode_header, header_size
from .errors import TransferIntegrityError
from .listing import Entry, scan
from .paths import check_relpath

__all__ = ["SourceReader"]

_NO_DIGEST = bytes(CHECK_SIZE)


class SourceReader:
    def __init__(self, root: str) -> None:
        self._root = root
        self._files: Sequence[Entry] = ()
        self._buf: npt.NDArray[np.uint8] | None = None
        self._fd = -1
        self._cur = -1
        self._off = 0
        self._check = new_check()

    def scan(self, exclude: Sequence[str] = ()) -> list[Entry]:
        return scan(self._root, exclude)

    def digests(self, paths: Sequence[str]) -> list[bytes]:
        return [digest_file(os.path.join(self._root, check_relpath(p))) for p in paths]

    def start(self, files: Sequence[Entry]) -> None:
        """Set the files to stream; ``file_id`` in chunk specs indexes this list."""
        self._close()
        self._files = tuple(files)
        self._cur = -1

    def read(self, spec: ChunkSpec) -> npt.NDArray[np.uint8]:
        """The frame of ``spec`` in the reader's own buffer (reused by the next call)."""
        total = spec.frame_size
        if self._buf is None or self._buf.size < total:
            self._buf = np.empty(total, dtype=np.uint8)
        frame = self._buf[:total]
        self.read_into(spec, frame.data.cast("B"))
        return frame

    def read_into(self, spec: ChunkSpec, out: memoryview) -> memoryview:
        """Fill ``out`` (at least ``spec.frame_size`` bytes) with the frame of ``spec``
        and return the filled part."""
        view = out[: spec.frame_size]
        if view.nbytes != spec.frame_size:
            raise ValueError(f"buffer of {out.nbytes} bytes for a {spec.frame_size}-byte frame")
        pos = header_size(len(spec.pieces))
        digests: list[bytes] = []
        for piece in spec.pieces:
            entry = self._files[piece.file_id]
            if piece.offset == 0:
                self._open(piece.file_id)
            elif piece.file_id != self._cur or piece.offset != self._off:
                raise TransferIntegrityError(
                    f"chunk {spec.index} read out of order at {entry.path!r}"
                )
            part = view[pos : pos + piece.length]
            self._read_exact(part, piece.offset, entry)
            self._check.update(part)
            self._off += piece.length
            pos += piece.length
            if piece.last:
                self._check_unchanged(entry)
                digests.append(self._check.digest())
                self._close()
            else:
                digests.append(_NO_DIGEST)
        encode_header(view, spec.pieces, digests)
        return view

    def _open(self, file_id: int) -> None:
        self._close()
        entry = self._files[file_id]
        path = os.path.join(self._root, entry.path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as err:
            raise TransferIntegrityError(
                f"source file {path!r} vanished or changed: {err}"
            ) from err
        self._fd, self._cur, self._off = fd, file_id, 0
        self._check = new_check()
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != entry.size:
            raise TransferIntegrityError(f"source file {path!r} changed since it was listed; retry")
        if entry.size > 0:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)

    def _read_exact(self, part: memoryview, offset: int, entry: Entry) -> None:
        got = 0
        while got < part.nbytes:
            n = os.preadv(self._fd, [part[got:]], offset + got)
            if n == 0:
                raise TransferIntegrityError(
                    f"source file {entry.path!r} shrank while being copied"
                )
            got += n

    def _check_unchanged(self, entry: Entry) -> None:
        st = os.fstat(self._fd)
        if st.st_size != entry.size or st.st_mtime_ns != entry.mtime_ns:
            raise TransferIntegrityError(f"source file {entry.path!r} changed while being copied")

    def _close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
