"""Same-node copies: no object store, no chunks, the kernel does the bytes.

When source and target share a node, streaming through Ray would only add copies.
The delta plan, sanitizing and staged commit are the same as across nodes; the bytes
are either hard links (when ``hardlink`` and both sides share a filesystem: no data
moves, and nothing needs verifying since it is the same inode) or in-kernel copies
(``sendfile``), whose length is checked against the listing. On the driver's own node,
``api`` runs this in a thread rather than a task.

Hard links are safe for checkpoints that are written once and then only read or
replaced (new files, renames), which is how checkpoints are made; a caller that edits
files of either copy in place afterwards must pass ``hardlink=False``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from .checksum import digest_file
from .delta import make_plan, needs_checksum
from .errors import SizeLimitExceeded, TransferError, TransferIntegrityError
from .listing import Entry, scan
from .staging import StagedTree

__all__ = ["LocalResult", "copy_local"]

_SENDFILE_MAX = 1 << 30


@dataclass(frozen=True, slots=True)
class LocalResult:
    bytes_sent: int
    files_sent: int
    files_skipped: int
    files_deleted: int
    files_linked: int


def _inside(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip("/") + "/")


def copy_local(
    source: str,
    target: str,
    token: str,
    *,
    delta: bool = True,
    mirror: bool = False,
    always_checksum: bool = False,
    max_size: int | None = None,
    exclude: Sequence[str] = (),
    hardlink: bool = True,
    cancelled: threading.Event | None = None,
) -> LocalResult:
    """Copy on this node; ``cancelled``, checked between files, abandons the copy (the
    staged tree is dropped) when the caller runs this in a thread it cannot kill."""
    src, dst = os.path.realpath(source), os.path.realpath(target)
    if _inside(dst, src) or _inside(src, dst):
        raise TransferError(f"cannot copy {src!r} into {dst!r}: one contains the other")
    source_entries = scan(src, exclude)
    target_entries = scan(dst, exclude, missing_ok=True)
    ambiguous = needs_checksum(source_entries, target_entries, always_checksum=always_checksum)
    plan = make_plan(
        source_entries,
        target_entries,
        delta=delta,
        mirror=mirror,
        always_checksum=always_checksum,
        source_digests={p: digest_file(os.path.join(src, p)) for p in ambiguous},
        target_digests={p: digest_file(os.path.join(dst, p)) for p in ambiguous},
        exclude=exclude,
    )
    plan.validate()
    if max_size is not None and plan.bytes_to_send > max_size:
        raise SizeLimitExceeded(
            f"{plan.bytes_to_send} bytes to copy from {src!r} exceed max_size={max_size}"
        )
    staged = StagedTree(dst, token)
    staged.open()
    linked = 0
    try:
        staged.make_dirs(plan.dirs)
        can_link = hardlink and os.stat(src).st_dev == os.stat(os.path.dirname(staged.root)).st_dev
        for entry in plan.send:
            if cancelled is not None and cancelled.is_set():
                raise TransferError(f"copy into {dst!r} cancelled")
            if can_link and _try_link(os.path.join(src, entry.path), staged.path(entry.path)):
                linked += 1
                staged.sync_path(entry.path)  # the copy is durable only if its bytes are
            else:
                _copy_file(os.path.join(src, entry.path), staged, entry)
        staged.link_kept(plan.keep)
        staged.make_symlinks(plan.links)
        staged.carry_over(plan.mirror, plan.exclude)
        staged.seal(plan.dirs)
        staged.commit()
    except BaseException:
        staged.abort()
        raise
    return LocalResult(
        bytes_sent=plan.bytes_to_send,
        files_sent=len(plan.send),
        files_skipped=len(plan.keep),
        files_deleted=len(plan.deleted),
        files_linked=linked,
    )


def _try_link(src: str, dst: str) -> bool:
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        return False
    return True


def _copy_file(src: str, staged: StagedTree, entry: Entry) -> None:
    """An in-kernel copy (``sendfile``): no user-space buffer at all. Measured here, it
    beat the O_DIRECT writer for local copies (2 GiB: ~5 s against ~17 s), since the
    page cache absorbs a checkpoint-sized burst; the file's fsync then runs in the
    background while the next files are copied (:mod:`transfer.durable`)."""
    in_fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        out_fd = staged.create_file(entry.path)
        try:
            offset = 0
            while n := os.sendfile(out_fd, in_fd, offset, _SENDFILE_MAX):
                offset += n
            st = os.fstat(in_fd)
            if offset != entry.size or st.st_size != entry.size or st.st_mtime_ns != entry.mtime_ns:
                raise TransferIntegrityError(
                    f"source file {src!r} changed while being copied; retry"
                )
        except BaseException:
            os.close(out_fd)
            raise
        staged.sync_file(out_fd, entry)  # owns out_fd from here
    finally:
        os.close(in_fd)
