"""Blocking file helpers, run in worker threads by the drivers.

Everything that touches the local disk lives here so the async code never blocks the
event loop on a slow disk or an NFS mount, and so the temp-file-then-rename pattern
that makes local writes atomic is written once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import threading
import uuid
from dataclasses import dataclass
from typing import NamedTuple

from .errors import StorageError, UnsupportedFile
from .keys import RESERVED_PREFIX, relative_key

__all__ = [
    "CHUNK",
    "Digest",
    "LocalFile",
    "Sink",
    "atomic_write_bytes",
    "copy_hashed",
    "fsync_dir",
    "hash_file",
    "remove_quietly",
    "scan_dir",
    "temp_sibling",
    "write_file",
]

#: Read/write granularity: big enough to amortise a thread hop, small enough to be noise
#: against the memory bound.
CHUNK = 1 << 20


class Digest(NamedTuple):
    size: int
    sha256: str


@dataclass(frozen=True)
class LocalFile:
    path: str
    rel: str
    size: int


def temp_sibling(path: str) -> str:
    """A reserved, unique name next to ``path`` (same directory, hence same filesystem,
    so a rename from it is atomic). Listings skip reserved names."""
    head, tail = os.path.split(path)
    return os.path.join(head, f"{RESERVED_PREFIX}{tail[:64]}-{uuid.uuid4().hex[:12]}")


def scan_dir(local_dir: str, *, uri: str = "", key: str | None = None) -> list[LocalFile]:
    """Every file under ``local_dir`` to store, sorted by relative path.

    Only regular files are stored. A symbolic link to a regular file *inside*
    ``local_dir`` is stored as a copy of that file, under the link's name; a link that
    resolves outside ``local_dir`` is never followed (its target's bytes could be
    anything on the machine: ``/etc/passwd``, another trial's files), nor is a link to a
    directory, a dangling link, a FIFO (reading one would block), a socket or a device:
    each raises :class:`UnsupportedFile` naming the entry, before anything is written.
    ``key`` is where the files are going, for the message."""
    if not os.path.isdir(local_dir):
        raise StorageError(f"local directory {local_dir!r} does not exist", uri=uri, key=key)
    real_top = os.path.realpath(local_dir)
    out: list[LocalFile] = []
    for root, dirs, files in os.walk(local_dir):
        for d in dirs:
            path = os.path.join(root, d)
            if os.path.islink(path):
                rel = relative_key(path, local_dir, uri=uri)
                raise UnsupportedFile(
                    f"{rel!r} is a symbolic link to a directory "
                    f"({os.readlink(path)!r}): links to directories are not stored; copy "
                    "the directory in instead",
                    uri=uri,
                    key=key,
                )
        for name in files:
            path = os.path.join(root, name)
            rel = relative_key(path, local_dir, uri=uri)
            source, size = _storable(path, rel, real_top, uri, key)
            out.append(LocalFile(source, rel, size))
    out.sort(key=lambda f: f.rel)
    return out


def _storable(path: str, rel: str, real_top: str, uri: str, key: str | None) -> tuple[str, int]:
    """The path to read ``rel``'s bytes from (the file, or the target of a link to a file
    inside the directory) and their size; :class:`UnsupportedFile` for anything else."""
    st = os.lstat(path)
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return path, st.st_size
    if not stat.S_ISLNK(mode):
        raise UnsupportedFile(
            f"{rel!r} is a {_kind(mode)}: only regular files (and links to "
            "files inside the directory) can be stored; write a regular file instead",
            uri=uri,
            key=key,
        )
    text = os.readlink(path)
    target = os.path.realpath(path)
    if os.path.commonpath([real_top, target]) != real_top:
        raise UnsupportedFile(
            f"{rel!r} is a symbolic link to {text!r}, outside the directory: links out "
            "of it are never followed; copy that file in instead",
            uri=uri,
            key=key,
        )
    try:
        target_st = os.stat(target)
    except OSError:  # dangling, or a loop of links
        what = "which cannot be resolved"
    else:
        if stat.S_ISREG(target_st.st_mode):
            return target, target_st.st_size
        what = f"a {_kind(target_st.st_mode)}"
    raise UnsupportedFile(
        f"{rel!r} is a symbolic link to {text!r}, {what}: only regular files can be stored",
        uri=uri,
        key=key,
    )


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "FIFO (named pipe)"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISLNK, "symbolic link"),
    ):
        if test(mode):
            return name
    return "special file"


def hash_file(path: str) -> Digest:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return Digest(size, h.hexdigest())


def fsync_dir(path: str) -> None:
    """Make a rename in ``path`` durable; a no-op where directories cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_temp_sibling(path: str, data: bytes, *, fsync: bool) -> str:
    """Write ``data`` whole to a new temporary sibling of ``path`` (creating the
    directory) and return its name, for the caller to rename or link into place; on a
    failure nothing is left behind."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = temp_sibling(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        remove_quietly(tmp)
        raise
    return tmp


def atomic_write_bytes(path: str, data: bytes, *, fsync: bool) -> None:
    tmp = write_temp_sibling(path, data, fsync=fsync)
    try:
        os.replace(tmp, path)
    except BaseException:
        remove_quietly(tmp)
        raise
    if fsync:
        fsync_dir(os.path.dirname(path))


def write_file(path: str, data: bytes) -> None:
    """Write a whole file via a temporary sibling, creating its directory."""
    atomic_write_bytes(path, data, fsync=False)


def copy_hashed(src: str, dst: str, *, fsync: bool, stop: threading.Event | None = None) -> Digest:
    """Copy ``src`` to ``dst`` (whose directory must exist) hashing on the way, so the
    data is read once. ``stop`` lets a cancelled caller end the copy early."""
    h = hashlib.sha256()
    size = 0
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while chunk := fin.read(CHUNK):
            if stop is not None and stop.is_set():
                raise InterruptedError("copy cancelled")
            h.update(chunk)
            fout.write(chunk)
            size += len(chunk)
        if fsync:
            fout.flush()
            os.fsync(fout.fileno())
    return Digest(size, h.hexdigest())


#: Linux's FICLONE ioctl: a copy-on-write clone of a whole file (btrfs, XFS with
#: reflink, bcachefs...). The clone shares the committed file's blocks until either is
#: written, so a restore can hand a trainable its own writable files without copying
#: bytes, and a trainable that rewrites one never touches the checkpoint. Hard links
#: would be cheaper still but are not safe: they *are* the committed file, and file
#: modes do not stop a process running as root from rewriting it.
_FICLONE = 0x40049409
_NO_CLONE: set[int] = set()  # devices where cloning failed once: do not ask again


def clone_hashed(src: str, dst: str, *, stop: threading.Event | None = None) -> Digest:
    """``dst`` as a copy of ``src``, verified by hashing ``src``: a copy-on-write clone
    where the filesystem can (the bytes are read once, never written), else a
    :func:`copy_hashed` copy."""
    try:
        device = os.stat(os.path.dirname(dst) or ".").st_dev
    except OSError:
        device = -1
    if device not in _NO_CLONE and hasattr(os, "O_RDONLY"):
        try:
            import fcntl

            with open(src, "rb") as fin, open(dst, "wb") as fout:
                fcntl.ioctl(fout.fileno(), _FICLONE, fin.fileno())
                h = hashlib.sha256()
                size = 0
                while chunk := fin.read(CHUNK):
                    if stop is not None and stop.is_set():
                        raise InterruptedError("copy cancelled")
                    h.update(chunk)
                    size += len(chunk)
            return Digest(size, h.hexdigest())
        except (OSError, ImportError) as err:
            if isinstance(err, InterruptedError):
                raise
            _NO_CLONE.add(device)  # ext4, tmpfs, NFS...: copy from now on
    return copy_hashed(src, dst, fsync=False, stop=stop)


def remove_quietly(path: str) -> None:
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass


class Sink:
    """A download target: bytes go to a temporary sibling of ``path``, hashed as they are
    written; :meth:`commit` renames it into place, :meth:`discard` removes it. Callers
    hand it about :data:`CHUNK` bytes per thread hop."""

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.tmp = temp_sibling(path)
        self._f = open(self.tmp, "wb")  # closed in commit/discard
        self._h = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._h.update(data)
        self._f.write(data)
        self.size += len(data)

    def digest(self) -> Digest:
        return Digest(self.size, self._h.hexdigest())

    def commit(self, *, fsync: bool = False) -> None:
        self._f.flush()
        if fsync:
            os.fsync(self._f.fileno())
        self._f.close()
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        if not self._f.closed:
            self._f.close()
        remove_quietly(self.tmp)
