"""Blocking conditional writes on a local or NFS directory, run in worker threads by
the local driver.

A file's version is the SHA-256 of its bytes: files are only ever replaced whole (by
rename), so bytes and version read together always agree.

- Create-if-absent writes a complete temporary sibling and hard-links it to the name:
  ``link()`` fails where a name exists, atomically, on local disks and on NFS alike, and
  readers never see a partial file. (A retransmitted NFS ``LINK`` can report "exists"
  after it succeeded, so a refused link is checked against the temporary file's link
  count.) Where the filesystem has no hard links, ``O_CREAT | O_EXCL`` is the fallback.
- Compare-and-replace and compare-and-delete read, compare and rename (or unlink) while
  holding an exclusive POSIX lock on a hidden sibling lock file, never removed. POSIX
  locks reach every host of an NFS mount that has locking (NFSv4, or NFSv3 with lockd;
  not a ``nolock`` mount). A POSIX lock belongs to the process, so threads of one process
  also take a lock of their own first.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import threading
from collections.abc import Iterator

from ._files import atomic_write_bytes, fsync_dir, remove_quietly, write_temp_sibling
from .keys import RESERVED_PREFIX

__all__ = ["create_exclusive", "delete_if", "lock_name", "read_versioned", "replace_if"]

_NO_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS}
_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def version_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def lock_name(name: str) -> str:
    """The lock file's name for the file ``name`` (same directory; listings skip it)."""
    return f"{RESERVED_PREFIX}lock-{name}"


def create_exclusive(path: str, data: bytes, *, fsync: bool) -> str | None:
    """Write ``data`` to ``path`` only if no file is there; its version, or None."""
    tmp = write_temp_sibling(path, data, fsync=fsync)
    try:
        os.link(tmp, path)
    except FileExistsError:
        if os.stat(tmp).st_nlink < 2:
            return None
    except OSError as err:
        if err.errno not in _NO_LINKS:
            raise
        return _create_excl(path, data, fsync=fsync)
    finally:
        remove_quietly(tmp)
    if fsync:
        fsync_dir(os.path.dirname(path))
    return version_of(data)


def _create_excl(path: str, data: bytes, *, fsync: bool) -> str | None:
    """Create-if-absent where hard links are refused (some FUSE and SMB mounts): the
    name appears at once and its bytes just after, so a reader may briefly see it empty."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return None
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    return version_of(data)


def read_versioned(path: str) -> tuple[bytes, str]:
    with open(path, "rb") as f:
        data = f.read()
    return data, version_of(data)


def replace_if(path: str, data: bytes, version: str, *, fsync: bool) -> str | None:
    """Replace ``path`` with ``data`` only if it holds ``version``; the new version."""
    with _locked(path) as held:
        if not held or _current_version(path) != version:
            return None
        atomic_write_bytes(path, data, fsync=fsync)
    return version_of(data)


def delete_if(path: str, version: str, *, fsync: bool) -> bool:
    """Delete ``path`` only if it holds ``version``; False if it holds another one."""
    with _locked(path) as held:
        if not held:
            return True  # not even its directory exists
        current = _current_version(path)
        if current is None:
            return True
        if current != version:
            return False
        os.unlink(path)
    if fsync:
        fsync_dir(os.path.dirname(path))
    return True


def _current_version(path: str) -> str | None:
    try:
        return read_versioned(path)[1]
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def _locked(path: str) -> Iterator[bool]:
    """Hold the lock of ``path`` (yields False, holding nothing, when its directory does
    not exist: then neither does the file)."""
    directory, name = os.path.split(path)
    lock_path = os.path.join(directory, lock_name(name))
    with _THREAD_LOCKS_GUARD:
        thread_lock = _THREAD_LOCKS.setdefault(lock_path, threading.Lock())
    with thread_lock:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:
            yield False
            return
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            yield True
        finally:
            os.close(fd)  # releases the lock
