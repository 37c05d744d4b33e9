"""The writing end, used by the task that conducts a copy on the target node.

It trusts nothing it receives. The plan is validated as a whole before anything is
created (:mod:`transfer.paths`); each frame's header is parsed with ``struct`` and every
piece must continue exactly the file and offset the sink expects next, within the
file's announced size, so a crafted frame can neither write outside the staged tree nor
grow a file. Each piece's write starts at once (:class:`~transfer.file_writer.FileWriter`,
big files straight from the frame's buffer) and its bytes are hashed meanwhile; a file
whose transit check differs from the source's fails the copy. A complete file is handed
to the staged tree, which makes it durable in the background.
Everything lands in a :class:`~transfer.staging.StagedTree`, so until ``commit`` the
target is untouched.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from .checksum import digest_file, new_check
from .chunks import decode
from .delta import Plan
from .errors import TransferError, TransferIntegrityError
from .file_writer import WRITE_DEPTH, FileWriter, OpenFile
from .from_store import StoredCopy, close_found, copy_found
from .listing import Entry, scan
from .paths import check_relpath
from .staging import WRITE_FLAGS, StagedTree

__all__ = ["CommitResult", "SinkWriter"]


@dataclass(frozen=True, slots=True)
class CommitResult:
    files_written: int
    files_kept: int
    bytes_written: int


@dataclass(slots=True)
class _Held:
    """A frame whose bytes are still being written, and how to hand it back."""

    writes: list[Future[None]]
    release: Callable[[], None]
    frame: Any  # kept alive until the writes are done


class SinkWriter:
    def __init__(self, target: str, token: str) -> None:
        self._target = target
        self._token = token
        self._staged: StagedTree | None = None
        self._plan: Plan | None = None
        self._cur = 0
        self._off = 0
        self._file: OpenFile | None = None
        self._check = new_check()
        self._bytes = 0
        self._failed: BaseException | None = None
        self._writer: FileWriter | None = None
        self._held: deque[_Held] = deque()
        self._from_store = 0

    @property
    def bytes_written(self) -> int:
        return self._bytes

    def scan(self, exclude: Sequence[str] = ()) -> list[Entry]:
        return scan(self._target, exclude, missing_ok=True)

    def digests(self, paths: Sequence[str]) -> list[bytes]:
        return [digest_file(os.path.join(self._target, check_relpath(p))) for p in paths]

    def begin(self, plan: Plan) -> None:
        if not isinstance(plan, Plan):
            raise TransferError("sink received something that is not a Plan")
        plan.validate()
        staged = StagedTree(self._target, self._token)
        staged.open()
        self._staged, self._plan = staged, plan
        try:
            staged.make_dirs(plan.dirs)
        except BaseException:
            self.abort()
            raise

    def copy_from_store(self, found: Sequence[StoredCopy]) -> None:
        """Write the files the target's blob store holds (see :mod:`transfer.from_store`)
        into the staged tree, closing every blob; call after :meth:`begin`."""
        if self._staged is None:
            close_found(found)
            raise TransferError("copy_from_store before begin")
        staged = self._staged
        try:
            for f in found:
                fd = staged.create_file(f.entry.path)
                try:
                    copy_found(f, fd)
                except BaseException:
                    os.close(fd)
                    raise
                staged.sync_file(fd, f.entry)
                self._from_store += 1
        finally:
            close_found(found)

    def write(
        self, frame: Any, release: Callable[[], None] | None = None, hold: int = WRITE_DEPTH
    ) -> tuple[int, int]:
        """Write one frame; returns (bytes written, files completed) for progress.

        Without ``release`` the frame's bytes are written before this returns. With it,
        writes may still read the frame afterwards: the caller keeps the buffer unchanged
        until ``release()`` is called (from this thread, by a later ``write`` or by
        ``commit``); at most ``hold`` frames (and never more than ``WRITE_DEPTH``) are
        held when this returns, so a caller with ``n`` buffers passes ``n - 1`` and
        always has one to receive the next frame into.
        """
        if self._failed is not None:
            raise TransferError("sink already failed; abort this copy") from self._failed
        try:
            writes: list[Future[None]] = []
            done = self._write(frame, writes)
            if release is None:
                for fut in writes:
                    fut.result()
            else:
                self._held.append(_Held(writes, release, frame))
                self._settle(max(0, min(hold, WRITE_DEPTH)))
            return done
        except BaseException as err:
            self._failed = err
            raise

    def _write(self, frame: Any, writes: list[Future[None]]) -> tuple[int, int]:
        if self._plan is None or self._staged is None:
            raise TransferError("write before begin")
        try:
            view = memoryview(frame).cast("B")
        except TypeError as err:
            raise TransferIntegrityError("chunk frame is not a byte buffer") from err
        files = self._plan.send
        nbytes = done = 0
        for piece in decode(view):
            if piece.file_id != self._cur or piece.file_id >= len(files):
                raise TransferIntegrityError(
                    f"chunk piece for file #{piece.file_id}, expected #{self._cur}"
                )
            entry = files[piece.file_id]
            end = piece.offset + piece.length
            if piece.offset != self._off or end > entry.size or piece.last != (end == entry.size):
                raise TransferIntegrityError(
                    f"chunk piece for {entry.path!r} at [{piece.offset}, {end}) does not "
                    f"continue the file at {self._off} of {entry.size} bytes"
                )
            if self._writer is None:
                self._writer = FileWriter()
            if self._file is None:
                path = self._staged.path(entry.path)
                self._file = self._writer.open(path, WRITE_FLAGS, entry.size)
                self._check = new_check()
            data = view[piece.start : piece.start + piece.length]
            writes += self._writer.write(self._file, data)
            self._check.update(data)
            self._off = end
            nbytes += piece.length
            if piece.last:
                if self._check.digest() != piece.digest:
                    raise TransferIntegrityError(
                        f"checksum mismatch for {entry.path!r}: the bytes received differ "
                        "from the source's; retry the copy"
                    )
                opened, self._file = self._file, None
                complete = self._writer.finish(opened)
                self._staged.sync_file(opened.fd, entry, complete)
                self._cur, self._off = self._cur + 1, 0
                done += 1
        self._bytes += nbytes
        return nbytes, done

    def _settle(self, keep: int) -> None:
        """Hand back the frames whose writes are done, oldest first, and wait until at
        most ``keep`` are held."""
        while self._held and (
            len(self._held) > keep or all(f.done() for f in self._held[0].writes)
        ):
            held = self._held.popleft()
            for fut in held.writes:
                fut.result()
            held.release()

    def commit(self) -> CommitResult:
        if self._plan is None or self._staged is None:
            raise TransferError("commit before begin")
        if self._failed is not None:
            raise TransferError("cannot commit a failed copy") from self._failed
        plan, staged = self._plan, self._staged
        if self._cur != len(plan.send):
            raise TransferIntegrityError(
                f"copy incomplete: {self._cur} of {len(plan.send)} files arrived"
            )
        try:
            self._settle(0)
            staged.link_kept(plan.keep)
            staged.make_symlinks(plan.links)
            staged.carry_over(plan.mirror, plan.exclude)
            staged.seal(plan.dirs)
            staged.commit()
        except BaseException:
            self.abort()
            raise
        self._staged = None
        self._release_writer()
        return CommitResult(len(plan.send), len(plan.keep) + self._from_store, self._bytes)

    def abort(self) -> None:
        """Drop everything staged; the target stays as it was. Safe to call twice."""
        self._release_writer()
        if self._file is not None:
            os.close(self._file.fd)
            self._file = None
        for held in self._held:
            held.release()
        self._held.clear()
        if self._staged is not None:
            self._staged.abort()
            self._staged = None

    def _release_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
