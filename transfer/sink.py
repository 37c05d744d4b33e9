"""The writing end, used by the task that conducts a copy on the target node.

It trusts nothing it receives. The plan is validated as a whole before anything is
created (:mod:`transfer.paths`); each frame's header is parsed with ``struct`` and every
piece must continue exactly the file and offset the sink expects next, within the
file's announced size, so a crafted frame can neither write outside the staged tree nor
grow a file. Bytes are hashed straight from the object store's zero-copy view and
written by :class:`~transfer.writer.FileWriter`; a file whose checksum differs from the
source's fails the copy.
Everything lands in a :class:`~transfer.staging.StagedTree`, so until ``commit`` the
target is untouched.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .checksum import digest_file, new_hasher
from .chunks import decode
from .errors import IntegrityError, TransferError
from .manifest import Entry, scan
from .paths import check_relpath
from .plan import Plan
from .staging import WRITE_FLAGS, StagedTree
from .writer import FileWriter

__all__ = ["CommitResult", "SinkWriter"]


@dataclass(frozen=True, slots=True)
class CommitResult:
    files_written: int
    files_kept: int
    bytes_written: int


class SinkWriter:
    def __init__(self, target: str, token: str) -> None:
        self._target = target
        self._token = token
        self._staged: StagedTree | None = None
        self._plan: Plan | None = None
        self._cur = 0
        self._off = 0
        self._fd = -1
        self._hasher = new_hasher()
        self._bytes = 0
        self._failed: BaseException | None = None
        self._writer: FileWriter | None = None

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

    def write(self, frame: Any) -> tuple[int, int]:
        """Write one frame; returns (bytes written, files completed) for progress."""
        if self._failed is not None:
            raise TransferError("sink already failed; abort this copy") from self._failed
        try:
            return self._write(frame)
        except BaseException as err:
            self._failed = err
            raise

    def _write(self, frame: Any) -> tuple[int, int]:
        if self._plan is None or self._staged is None:
            raise TransferError("write before begin")
        try:
            view = memoryview(frame).cast("B")
        except TypeError as err:
            raise IntegrityError("chunk frame is not a byte buffer") from err
        files = self._plan.send
        nbytes = done = 0
        for piece in decode(view):
            if piece.file_id != self._cur or piece.file_id >= len(files):
                raise IntegrityError(
                    f"chunk piece for file #{piece.file_id}, expected #{self._cur}"
                )
            entry = files[piece.file_id]
            end = piece.offset + piece.length
            if piece.offset != self._off or end > entry.size or piece.last != (end == entry.size):
                raise IntegrityError(
                    f"chunk piece for {entry.path!r} at [{piece.offset}, {end}) does not "
                    f"continue the file at {self._off} of {entry.size} bytes"
                )
            if self._writer is None:
                self._writer = FileWriter()
            if self._fd < 0:
                path = self._staged.path(entry.path)
                self._fd = self._writer.open(path, WRITE_FLAGS, entry.size)
                self._hasher = new_hasher()
            data = view[piece.start : piece.start + piece.length]
            self._hasher.update(data)
            self._writer.write(data)
            self._off = end
            nbytes += piece.length
            if piece.last:
                self._writer.finish()
                if self._hasher.digest() != piece.digest:
                    raise IntegrityError(
                        f"checksum mismatch for {entry.path!r}: the bytes received differ "
                        "from the source's; retry the copy"
                    )
                self._staged.finish_file(self._fd, entry)
                os.close(self._fd)
                self._fd, self._cur, self._off = -1, self._cur + 1, 0
                done += 1
        self._bytes += nbytes
        return nbytes, done

    def commit(self) -> CommitResult:
        if self._plan is None or self._staged is None:
            raise TransferError("commit before begin")
        if self._failed is not None:
            raise TransferError("cannot commit a failed copy") from self._failed
        plan, staged = self._plan, self._staged
        if self._cur != len(plan.send):
            raise IntegrityError(f"copy incomplete: {self._cur} of {len(plan.send)} files arrived")
        try:
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
        return CommitResult(len(plan.send), len(plan.keep), self._bytes)

    def abort(self) -> None:
        """Drop everything staged; the target stays as it was. Safe to call twice."""
        if self._writer is not None:
            self._writer.abandon()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._release_writer()
        if self._staged is not None:
            self._staged.abort()
            self._staged = None

    def _release_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
