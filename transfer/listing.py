"""Listing a directory tree: what exists, with the metadata the delta decision needs.

A listing holds only ``lstat`` facts (kind, size, mtime, permission bits, link text),
never file contents, so scanning a huge checkpoint is cheap; checksums are computed
later and only for the few files whose stats cannot decide. Paths are canonical
relative ``/`` paths (see :mod:`transfer.paths`), sorted, so two listings of equal
trees compare equal.
"""

from __future__ import annotations

import enum
import fnmatch
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import TransferError, UnsafePathError

__all__ = ["Entry", "EntryKind", "is_excluded", "scan"]


class EntryKind(str, enum.Enum):
    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"


@dataclass(frozen=True, slots=True)
class Entry:
    """One node of a tree. ``link`` is the symlink's text; ``mode`` the permission bits."""

    path: str
    kind: EntryKind
    size: int = 0
    mtime_ns: int = 0
    mode: int = 0o644
    link: str = ""


def is_excluded(path: str, patterns: Sequence[str]) -> bool:
    """Glob exclusion as users expect it from ignore files.

    A pattern without ``/`` matches any single name (``*.tmp`` excludes ``a/b.tmp``); a
    pattern with ``/`` matches the whole relative path (``logs/*``). An excluded
    directory takes its subtree with it.
    """
    name = path.rpartition("/")[2]
    for pattern in patterns:
        subject = path if "/" in pattern else name
        if fnmatch.fnmatchcase(subject, pattern):
            return True
    return False


def scan(root: str, exclude: Sequence[str] = (), *, missing_ok: bool = False) -> list[Entry]:
    """List ``root`` recursively without following symlinks.

    Raises UnsafePathError for device files, FIFOs and sockets (a checkpoint never
    needs them, and silently skipping them would make a copy quietly incomplete), and
    TransferError when ``root`` is not a directory (or is missing, unless ``missing_ok``).
    """
    try:
        st = os.stat(root)
    except FileNotFoundError:
        if missing_ok:
            return []
        raise TransferError(f"directory {root!r} does not exist on this node") from None
    if not stat.S_ISDIR(st.st_mode):
        raise TransferError(f"{root!r} exists but is not a directory")
    out: list[Entry] = []
    _scan_into(root, "", tuple(exclude), out)
    out.sort(key=lambda e: e.path)
    return out


def _scan_into(abs_dir: str, rel_dir: str, exclude: tuple[str, ...], out: list[Entry]) -> None:
    try:
        it = os.scandir(abs_dir)
    except FileNotFoundError:
        return  # removed while we were listing: treat as gone
    subdirs: list[tuple[str, str]] = []
    with it:
        for de in it:
            rel = f"{rel_dir}/{de.name}" if rel_dir else de.name
            if exclude and is_excluded(rel, exclude):
                continue
            try:
                st = de.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            mode = st.st_mode
            perms = stat.S_IMODE(mode)
            if stat.S_ISREG(mode):
                out.append(Entry(rel, EntryKind.FILE, st.st_size, st.st_mtime_ns, perms))
            elif stat.S_ISDIR(mode):
                out.append(Entry(rel, EntryKind.DIR, 0, st.st_mtime_ns, perms))
                subdirs.append((de.path, rel))
            elif stat.S_ISLNK(mode):
                out.append(
                    Entry(rel, EntryKind.SYMLINK, 0, st.st_mtime_ns, perms, os.readlink(de.path))
                )
            else:
                raise UnsafePathError(
                    f"{de.path!r} is a device file, FIFO or socket; remove it or exclude it"
                )
    for abs_sub, rel_sub in subdirs:
        _scan_into(abs_sub, rel_sub, exclude, out)
