"""The node's copies of content-addressed chunks: a restore reads a chunk this node has
already held from its own disk instead of the object store.

A chunk is named by its SHA-256, so a copy is good whatever store or experiment it came
from: the chunks of a frozen backbone that this node's trials saved are the chunks of
the donor checkpoint a PBT exploit restores, and of the checkpoint a restarted trial
loads. A save puts here the chunks it found stored already (content that repeats: a
frozen backbone, a base model; not the chunks that changed, which would double a save's
disk writes for copies rarely read), a restore the chunks it fetched; a restore looks
here first. On S3 a checkpoint of a 52 MiB model was 16 GETs where a full copy is
3 (the emulator closes the connection after each one); with the node's copies it is
the manifest and the chunks that changed.

Safe by construction:

- **Verified on every use.** A copy is used only once its bytes hash to its name (a
  damaged or truncated one is removed and the chunk fetched from the store), so a
  restore checks every byte against the manifest as before; that hash is the chunk's
  one check, never repeated.
- **Shared by the node's processes** (trial actors, persisters, drivers): a copy is
  written under a temporary name and renamed into place, so a reader sees a whole file
  or none, and a reader holding a copy open keeps its bytes when another process evicts
  it.
- **Bounded.** At most :data:`MAX_BYTES` (or a tenth of the free space, if less), the
  least recently used evicted first (a use touches the copy's mtime). Each process
  counts what it adds since its last scan; the bound is exact only per process.
- **Never the only copy.** Nothing is deleted from a store because the node has it;
  the cache only spares reads.

Where: ``$TRIALFLOW_BLOB_CACHE`` (a directory; ``0``/``off`` turns it off), else
``$XDG_CACHE_HOME/trialflow/blobs`` or ``~/.cache/trialflow/blobs``. A directory that
cannot be created or written turns it off for the process.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading

from ._files import remove_quietly, temp_sibling
from .keys import RESERVED_PREFIX

__all__ = ["CACHE_ENV", "MAX_BYTES", "BlobCache", "node_cache"]

log = logging.getLogger("trialflow.storage")

CACHE_ENV = "TRIALFLOW_BLOB_CACHE"
#: The most the node's copies take (4 GiB), unless a tenth of the free space is less.
MAX_BYTES = 4 << 30
_OFF = frozenset({"0", "false", "no", "off"})


class BlobCache:
    """Chunks by SHA-256 under ``root`` (``<2 hex>/<64 hex>``). Blocking methods: call
    them from a worker thread."""

    def __init__(self, root: str, max_bytes: int = MAX_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.ok = True  # False once the directory refused a write
        self._lock = threading.Lock()
        self._bytes: int | None = None  # held, as of the last scan plus what we added

    def path(self, sha256: str) -> str:
        return os.path.join(self.root, sha256[:2], sha256)

    def get(self, sha256: str, size: int) -> bytes | None:
        """The chunk's bytes if this node holds a good copy (verified against its name
        here: the caller need not hash them again), else None."""
        path = self.path(sha256)
        try:
            with open(path, "rb") as fh:
                data = fh.read(size + 1)
        except OSError:
            return None
        if len(data) != size or hashlib.sha256(data).hexdigest() != sha256:
            log.warning("%s: a damaged copy of a checkpoint chunk; removed", path)
            remove_quietly(path)
            return None
        try:
            os.utime(path)  # recently used: evicted last
        except OSError:
            pass
        return data

    def put(self, sha256: str, data: bytes | memoryview) -> None:
        """Keep a copy of the chunk ``data`` whose SHA-256 the caller has checked (or
        computed), unless one is here already. Best effort: a full or read-only disk
        only means no copy."""
        if not self.ok:
            return
        path = self.path(sha256)
        if os.path.exists(path):
            return
        tmp = temp_sibling(path)
        try:
            # Private to the user, as the checkpoints are: 0700 folders, 0600 files.
            os.makedirs(self.root, mode=0o700, exist_ok=True)
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            with open(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except FileNotFoundError:  # another process evicted the folder meanwhile
            remove_quietly(tmp)
            return
        except OSError as err:
            remove_quietly(tmp)
            self.ok = False
            log.info("%s: no node copies of checkpoint chunks (%s)", self.root, err)
            return
        with self._lock:
            if self._bytes is None:
                self._bytes = _held(self.root)
            else:
                self._bytes += len(data)
            over = self._bytes > self._limit()
        if over:
            self.evict()

    def evict(self) -> int:
        """Remove the least recently used copies until they take at most 80% of the
        bound; how many went."""
        entries: list[tuple[float, int, str]] = []
        for folder in _folders(self.root):
            try:
                it = os.scandir(folder)
            except OSError:
                continue
            with it:
                for e in it:
                    if e.name.startswith(RESERVED_PREFIX):
                        continue  # a copy another process is writing
                    try:
                        st = e.stat()
                    except OSError:
                        continue
                    entries.append((st.st_mtime, st.st_size, e.path))
        total = sum(size for _, size, _ in entries)
        target = int(self._limit() * 0.8)
        gone = 0
        for _, size, path in sorted(entries):
            if total <= target:
                break
            remove_quietly(path)
            total -= size
            gone += 1
        with self._lock:
            self._bytes = total
        return gone

    def _limit(self) -> int:
        try:
            st = os.statvfs(self.root)
            return min(self.max_bytes, st.f_bavail * st.f_frsize // 10 + (self._bytes or 0))
        except OSError:
            return self.max_bytes


def _folders(root: str) -> list[str]:
    try:
        with os.scandir(root) as it:
            return [e.path for e in it if e.is_dir(follow_symlinks=False) and len(e.name) == 2]
    except OSError:
        return []


def _held(root: str) -> int:
    total = 0
    for folder in _folders(root):
        with os.scandir(folder) as it:
            for e in it:
                try:
                    total += e.stat().st_size
                except OSError:
                    pass
    return total


_CACHES: dict[str, BlobCache] = {}
_CACHES_LOCK = threading.Lock()


def node_cache() -> BlobCache | None:
    """This node's cache (see the module), or None when it is off. Read from the
    environment at each call, so a process (a test) may move or disable it."""
    setting = os.environ.get(CACHE_ENV, "").strip()
    if setting.lower() in _OFF:
        return None
    if setting:
        root = os.path.abspath(os.path.expanduser(setting))
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "trialflow", "blobs")
    with _CACHES_LOCK:
        cache = _CACHES.get(root)
        if cache is None:
            cache = _CACHES[root] = BlobCache(root)
    return cache if cache.ok else None
