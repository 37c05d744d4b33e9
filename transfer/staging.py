"""Building the new target tree beside the old one, then swapping it in at once.

Why a whole staged tree rather than file-by-file renames: a copy that dies halfway
through renaming would leave a mix of old and new files, which for a checkpoint is
worse than either. So the complete new tree is built in a hidden sibling directory
(same filesystem, so renames are atomic): sent files are written there, unchanged
files are hard-linked from the old tree (no bytes copied), extra target entries are
carried over unless mirroring. Commit is one ``renameat2(RENAME_EXCHANGE)`` (two
renames where unavailable); anything before it leaves the target as it was. Before the
swap every file and directory of the new tree is on disk, and after it the swap itself
(:mod:`transfer.durable` says why and at what cost), so even a machine crash leaves the
old tree or the complete new one.

A per-target lock (``flock`` in the temp directory, released by the kernel if the
process dies) serialises copies into one target and lets the next copy clean staging
directories left by a killed one.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Sequence

from .durable import Syncer, fsync_dir
from .errors import TransferError
from .listing import Entry, is_excluded

__all__ = ["WRITE_FLAGS", "StagedTree", "clean_stale"]

_STAGE = ".tf-stage-"
_OLD = ".tf-old-"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

try:
    _renameat2: Callable[..., int] | None = ctypes.CDLL(None, use_errno=True).renameat2
except (AttributeError, OSError):
    _renameat2 = None


def _exchange(a: str, b: str) -> bool:
    """Atomically swap two paths; False when the kernel or filesystem cannot."""
    if _renameat2 is None:
        return False
    rc = _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), a)


class _Lock:
    def __init__(self, target: str) -> None:
        lock_dir = os.path.join(tempfile.gettempdir(), "trialflow-transfer-locks")
        os.makedirs(lock_dir, exist_ok=True)
        key = hashlib.sha256(os.fsencode(target)).hexdigest()[:32]
        self._path = os.path.join(lock_dir, key + ".lock")
        self._fd = -1
        self._target = target

    def acquire(self, timeout: float) -> None:
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._fd = fd
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise TransferError(
                        f"another copy into {self._target!r} is in progress; wait for it "
                        "or choose another target"
                    ) from None
                time.sleep(0.05)

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing drops the flock
            self._fd = -1


def _make_parents(path: str) -> list[str]:
    """``os.makedirs(path)``; returns the directories it created, deepest first."""
    missing: list[str] = []
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    if missing:
        os.makedirs(missing[0], exist_ok=True)
    return missing


def _siblings(target: str, marker: str) -> list[str]:
    parent, name = os.path.split(target)
    prefix = f".{name}{marker}"
    try:
        return [os.path.join(parent, n) for n in os.listdir(parent) if n.startswith(prefix)]
    except FileNotFoundError:
        return []


def _remove_leftovers(target: str) -> None:
    for path in _siblings(target, _STAGE) + _siblings(target, _OLD):
        shutil.rmtree(path, ignore_errors=True)


def clean_stale(target: str, timeout: float = 10.0) -> None:
    """Remove staging left by a killed copy; waits for that copy's lock to be released."""
    target = os.path.realpath(target)
    lock = _Lock(target)
    lock.acquire(timeout)
    try:
        _remove_leftovers(target)
    finally:
        lock.release()


class StagedTree:
    """The new target tree under construction; see the module docstring.

    Methods are called in order: ``open``, ``make_dirs``, file writes
    (``create_file`` / ``sync_file``), ``link_kept``, ``make_symlinks``,
    ``carry_over``, ``seal``, then ``commit`` or ``abort`` (``abort`` is always safe).
    Each file is handed to ``sync_file`` (or ``sync_path``) once complete and is made
    durable in the background; ``commit`` waits for them.
    """

    def __init__(self, target: str, token: str, lock_timeout: float = 30.0) -> None:
        self.target = os.path.realpath(target)
        parent, name = os.path.split(self.target)
        if not name:
            raise TransferError(f"target {target!r} cannot be a filesystem root")
        self.root = os.path.join(parent, f".{name}{_STAGE}{token}")
        self._token = token
        self._lock = _Lock(self.target)
        self._lock_timeout = lock_timeout
        self._open = False
        self._syncer: Syncer | None = None
        self._dirs: list[str] = []  # every directory of the staged tree, root first
        self._made: list[str] = []  # the target's ancestors this copy created

    def open(self) -> None:
        if os.path.lexists(self.target) and not os.path.isdir(self.target):
            raise TransferError(f"target {self.target!r} exists and is not a directory")
        self._made = _make_parents(os.path.dirname(self.target))
        self._lock.acquire(self._lock_timeout)
        self._open = True
        _remove_leftovers(self.target)
        self._syncer = Syncer()
        os.mkdir(self.root, 0o700)
        self._dirs = [self.root]

    def path(self, rel: str) -> str:
        return os.path.join(self.root, rel)

    def make_dirs(self, dirs: Sequence[Entry]) -> None:
        for e in sorted(dirs, key=lambda d: d.path.count("/")):
            os.mkdir(self.path(e.path), 0o700)
            self._dirs.append(self.path(e.path))

    def create_file(self, rel: str) -> int:
        """Open a new file for writing; never follows or overwrites anything."""
        return os.open(self.path(rel), WRITE_FLAGS, 0o600)

    def sync_file(self, fd: int, entry: Entry, before: Callable[[int], None] | None = None) -> None:
        """Hand over ``fd``, a file of the tree whose bytes are all written or under way:
        in the background, ``before(fd)`` (the writer completing it), then the mode and
        mtime of ``entry``, fsync and close. Blocks while many files wait."""

        def finish(fd: int) -> None:
            if before is not None:
                before(fd)
            os.fchmod(fd, entry.mode)
            os.utime(fd, ns=(entry.mtime_ns, entry.mtime_ns))

        self._syncer_or_fail().submit(fd, finish)

    def sync_path(self, rel: str) -> None:
        """Make the file at ``rel`` durable as it is (a hard link's or a copy's bytes)."""
        fd = os.open(self.path(rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        self._syncer_or_fail().submit(fd)

    def _syncer_or_fail(self) -> Syncer:
        if self._syncer is None:
            raise TransferError("the staged tree is not open")
        return self._syncer

    def link_kept(self, kept: Sequence[Entry]) -> None:
        """Reuse unchanged files of the old tree: a hard link costs no bytes."""
        for e in kept:
            old, new = os.path.join(self.target, e.path), self.path(e.path)
            try:
                os.link(old, new, follow_symlinks=False)
                copied = False
            except OSError:
                shutil.copy2(old, new, follow_symlinks=False)
                copied = True
            st = os.lstat(new)
            if st.st_mtime_ns != e.mtime_ns or stat.S_IMODE(st.st_mode) != e.mode:
                os.chmod(new, e.mode)
                os.utime(new, ns=(e.mtime_ns, e.mtime_ns))
            if copied:
                self.sync_path(e.path)

    def make_symlinks(self, links: Sequence[Entry]) -> None:
        for e in links:
            os.symlink(e.link, self.path(e.path))

    def carry_over(self, mirror: bool, exclude: Sequence[str]) -> None:
        """Bring over old target entries the source does not have: all of them unless
        mirroring, else only excluded ones (exclusion protects, as in rsync)."""
        if not os.path.isdir(self.target):
            return
        self._carry_dir("", lambda rel: not mirror or is_excluded(rel, exclude))

    def _carry_dir(self, rel_dir: str, wanted: Callable[[str], bool]) -> None:
        with os.scandir(os.path.join(self.target, rel_dir)) as it:
            entries = list(it)
        for de in entries:
            rel = f"{rel_dir}/{de.name}" if rel_dir else de.name
            dst = self.path(rel)
            try:
                st = os.lstat(dst)
            except FileNotFoundError:
                st = None
            is_dir = de.is_dir(follow_symlinks=False)
            if st is not None:
                # The source has this path: it wins. Merge only dir-into-dir, and only
                # into a real directory (never through a symlink).
                if is_dir and stat.S_ISDIR(st.st_mode):
                    self._carry_dir(rel, wanted)
                continue
            if not wanted(rel):
                continue
            if is_dir:
                os.mkdir(dst, 0o700)
                self._dirs.append(dst)
                self._carry_dir(rel, lambda _rel: True)
                shutil.copystat(de.path, dst, follow_symlinks=False)
            else:
                try:
                    os.link(de.path, dst, follow_symlinks=False)
                except OSError:
                    shutil.copy2(de.path, dst, follow_symlinks=False)
                    if not os.path.islink(dst):
                        self.sync_path(rel)

    def seal(self, dirs: Sequence[Entry]) -> None:
        """Give directories their final modes and mtimes, deepest first, now that
        nothing more will be created inside them."""
        for e in sorted(dirs, key=lambda d: d.path.count("/"), reverse=True):
            p = self.path(e.path)
            os.chmod(p, e.mode)
            os.utime(p, ns=(e.mtime_ns, e.mtime_ns))
        mode = stat.S_IMODE(os.stat(self.target).st_mode) if os.path.isdir(self.target) else 0o755
        os.chmod(self.root, mode)

    def commit(self) -> None:
        """Make the staged tree durable, swap it in, make the swap durable; afterwards
        the old tree is deleted."""
        syncer = self._syncer_or_fail()
        try:
            syncer.wait()
            syncer.sync_dirs(self._dirs)
        except OSError as err:
            raise TransferError(
                f"the copy into {self.target!r} could not be made durable ({err}): the disk "
                "did not take its bytes; the target is unchanged, check the disk and retry"
            ) from err
        if not os.path.lexists(self.target):
            os.rename(self.root, self.target)
            old = None
        elif _exchange(self.root, self.target):
            old = self.root
        else:
            parent, base = os.path.split(self.root)
            old = os.path.join(parent, base.replace(_STAGE, _OLD, 1))
            os.rename(self.target, old)
            try:
                os.rename(self.root, self.target)
            except OSError:
                os.rename(old, self.target)
                raise
        self._open = False
        try:
            # The swap lives in the target's parent; a directory this copy created for
            # the target lives in its own parent.
            for path in (self.target, *self._made):
                fsync_dir(os.path.dirname(path))
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            self._close_syncer()
            self._lock.release()

    def abort(self) -> None:
        try:
            self._close_syncer()
            shutil.rmtree(self.root, ignore_errors=True)
        finally:
            self._open = False
            self._lock.release()

    def _close_syncer(self) -> None:
        if self._syncer is not None:
            self._syncer.close()
            self._syncer = None
