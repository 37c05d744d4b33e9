"""Files the target node already holds by content: copied there from its blob store,
never sent.

A local storage keeps each checkpoint file's content once, as a blob named by its
SHA-256 (``<root>/.blobs/sha256/<ab>/<hex>``, see ``storage.blobs_local``). When a
checkpoint streams to a node whose disk holds blobs of the same storage (a restore
from another machine's checkpoint whose frozen part this machine saved too), the
receiving task takes those files from its own store instead of over the network.

They are *copied* from the blob (by the kernel), never hard-linked: the streamed
directory is handed to user code, which may rewrite its files, and a link would let
it rewrite every checkpoint sharing the blob. A blob is used only once its bytes hash
to the digest the caller gave (a damaged blob is never trusted: that file is sent),
and it is read through the descriptor that was hashed, so a garbage collection that
unlinks it meanwhile changes nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass

from .delta import Plan
from .listing import Entry

__all__ = ["ContentStore", "StoredCopy", "close_found", "copy_found", "split_plan"]

_READ = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ContentStore:
    """A directory on the target node of files named ``<2 hex>/<64 hex>`` by their
    SHA-256, and the SHA-256 (hex) of source files by relative path."""

    root: str
    digests: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class StoredCopy:
    """A file of the plan whose content the store holds: its entry, the blob, opened."""

    entry: Entry
    fd: int


def split_plan(plan: Plan, store: ContentStore | None) -> tuple[Plan, list[StoredCopy]]:
    """``plan`` without the files ``store`` holds (verified), and those files."""
    if store is None or not plan.send:
        return plan, []
    digests = dict(store.digests)
    send: list[Entry] = []
    found: list[StoredCopy] = []
    try:
        for entry in plan.send:
            fd = _open_verified(store.root, digests.get(entry.path), entry.size)
            if fd is None:
                send.append(entry)
            else:
                found.append(StoredCopy(entry, fd))
    except BaseException:
        close_found(found)
        raise
    if not found:
        return plan, []
    return dataclasses.replace(plan, send=tuple(send)), found


def _open_verified(root: str, sha: str | None, size: int) -> int | None:
    if sha is None or len(sha) != 64 or sha.strip("0123456789abcdef"):
        return None
    try:
        fd = os.open(os.path.join(root, sha[:2], sha), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_size == size and _sha256(fd) == sha:
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _sha256(fd: int) -> str:
    h = hashlib.sha256()
    offset = 0
    while chunk := os.pread(fd, _READ, offset):
        h.update(chunk)
        offset += len(chunk)
    return h.hexdigest()


def copy_found(found: StoredCopy, dst: int) -> None:
    """Copy the blob's bytes into ``dst`` (a new file), by the kernel where it can."""
    size, offset = found.entry.size, 0
    try:
        while offset < size:
            n = os.copy_file_range(found.fd, dst, size - offset, offset, offset)
            if n == 0:
                break
            offset += n
    except OSError:  # no copy_file_range between these files: plain reads and writes
        while chunk := os.pread(found.fd, _READ, offset):
            os.pwrite(dst, chunk, offset)
            offset += len(chunk)
    if offset != size:
        raise OSError(f"blob for {found.entry.path!r} ended at {offset} of {size} bytes")


def close_found(found: Sequence[StoredCopy]) -> None:
    for f in found:
        try:
            os.close(f.fd)
        except OSError:
            pass
