"""Content-addressed checkpoints on a local disk or NFS: files are hard links to blobs.

A committed checkpoint stays a plain directory of plain files (restores, the locality
check and the transfer stream read it as before), but each file is a hard link to the
blob of its content, ``.blobs/sha256/<ab>/<hex>`` under the storage root, which holds
one more link. A file whose content is already there costs a directory entry, not
its bytes: a frozen backbone saved at every checkpoint, a PBT exploit's copy of the
donor, trials started from one base model all share one inode.

Why links, and why this order:

- **Commit.** The scratch file is copied into the checkpoint's staging directory and
  hashed on the way, as before (it is read once either way, and hashing dominates the
  copy). Then, if the blob exists, the staged copy is replaced by a link to it (the
  copy never reaches the disk: it is not fsynced, and its pages are dropped with it);
  else the copy is made durable and linked in as the blob. The staging directory's
  one rename still commits the checkpoint.
- **Garbage collection is the link count.** A blob with ``st_nlink == 1`` is held by
  no checkpoint. Deleting a checkpoint removes its directory, then unlinks each of its
  blobs left with one link. No lock is needed: a saver that finds a blob gone (its
  ``link`` fails with ENOENT) keeps its own copy and publishes it; a blob unlinked just
  after a saver linked it leaves the saver's link holding the bytes (only the sharing
  is lost, never data).
- **Crashes** leave at worst blobs with one link, and staging or trash directories of
  our reserved name that still hold links: :meth:`LocalBlobs.sweep` (run by ``repair``
  and at the start of a resumed run, under the experiment's lease) removes both.
- **No hard links here** (another filesystem under the root, a FUSE or SMB mount:
  EXDEV, EPERM, ENOTSUP): the file keeps its own copy, as before, and this storage
  stops trying. Too many links to one blob (EMLINK) keeps a copy for that file only.

Restores copy out of a checkpoint (``clone_hashed``): user code is never handed a
link to a blob, which it could rewrite in place under every checkpoint sharing it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterable

from ._files import CHUNK, Digest, remove_quietly, temp_sibling
from .dedup import BLOBS_DIGEST
from .keys import BLOBS_PREFIX, RESERVED_PREFIX
from .manifest import MANIFEST_NAME

__all__ = ["NO_LINKS", "STALE_AFTER_S", "LocalBlobs", "blob_dir", "checkpoint_shas"]

log = logging.getLogger("trialflow.storage")

#: ``link()`` errors that mean "no hard links between these paths": copy instead.
NO_LINKS = frozenset({errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP})

#: A staging or trash directory of ours untouched this long is a crash's leftover (a
#: live save or delete touches its directory far more often): a sweep removes it.
STALE_AFTER_S = 3600.0


class LocalBlobs:
    """The blobs of one local storage root. Blocking methods: run them in a thread."""

    def __init__(self, root: str, *, fsync: bool) -> None:
        self.top = blob_dir(root)
        self.root = root
        self.fsync = fsync
        self.links_ok = True  # False once this filesystem refused a hard link
        self._dirs: set[str] = set()  # blob folders known to exist
        self._lock = threading.Lock()

    def path(self, sha256: str) -> str:
        return os.path.join(self.top, sha256[:2], sha256)

    # -- commit -----------------------------------------------------------------------

    def stage(self, src: str, dst: str, *, stop: threading.Event | None = None) -> Digest:
        """``dst`` (in a staging directory) as the content of ``src``: a hard link to
        that content's blob, which this writes if it is new. Returns size and SHA-256
        as read from ``src``."""
        h = hashlib.sha256()
        size = 0
        with open(src, "rb") as fin, open(dst, "wb") as fout:
            while chunk := fin.read(CHUNK):
                if stop is not None and stop.is_set():
                    raise InterruptedError("copy cancelled")
                h.update(chunk)
                fout.write(chunk)
                size += len(chunk)
            fout.flush()  # before an fsync, and before a link publishes it
            digest = Digest(size, h.hexdigest())
            if not self.links_ok:
                self._sync(fout.fileno())
                return digest
            blob = self.path(digest.sha256)
            if self._link_existing(blob, dst):
                return digest
            self._sync(fout.fileno())
        self._publish(dst, blob)
        return digest

    def _sync(self, fd: int) -> None:
        if self.fsync:
            os.fsync(fd)

    def _link_existing(self, blob: str, dst: str) -> bool:
        """Replace ``dst`` by a link to ``blob``; False (``dst`` untouched) if there is
        no such blob or it cannot be linked."""
        tmp = temp_sibling(dst)
        try:
            os.link(blob, tmp)
        except FileNotFoundError:
            return False
        except OSError as err:
            self._refused(err)
            return False
        try:
            os.replace(tmp, dst)
        except BaseException:
            remove_quietly(tmp)
            raise
        return True

    def _publish(self, staged: str, blob: str) -> None:
        """Make the (durable) ``staged`` file the blob of its content. If another saver
        published that content first (trials' first saves racing with the same base
        model), ``staged`` becomes a link to its blob, so the bytes are stored once; if
        that blob went meanwhile, ``staged`` stays a copy of its own."""
        folder = os.path.dirname(blob)
        for attempt in (0, 1):
            if attempt or folder not in self._dirs:
                os.makedirs(folder, exist_ok=True)
                with self._lock:
                    self._dirs.add(folder)
            try:
                os.link(staged, blob)
            except FileExistsError:
                self._link_existing(blob, staged)
                return
            except FileNotFoundError:  # the folder went (a cleanup by hand): once more
                if attempt:
                    raise
            except OSError as err:
                self._refused(err)
                return
            else:
                return

    def _refused(self, err: OSError) -> None:
        if err.errno == errno.EMLINK:  # this blob is full: a copy for this file only
            return
        if err.errno not in NO_LINKS:
            raise err
        if self.links_ok:
            self.links_ok = False
            log.info(
                "%s: the filesystem refuses hard links (%s); checkpoints are full copies",
                self.root,
                os.strerror(err.errno or 0),
            )

    # -- garbage collection ------------------------------------------------------------

    def release(self, shas: Iterable[str]) -> int:
        """Unlink each of these blobs that no checkpoint holds any more (one link);
        how many went. Call it after the checkpoint that held them is gone."""
        gone = 0
        for sha in set(shas):
            gone += _unlink_if_single(self.path(sha))
        return gone

    def sweep(self, *, now: float | None = None) -> int:
        """Remove what a crash left: our staging and trash directories untouched for
        :data:`STALE_AFTER_S` (they hold links), then every blob no checkpoint holds.
        Returns the number of blobs removed. Safe beside live saves (see the module)."""
        cutoff = (time.time() if now is None else now) - STALE_AFTER_S
        blobs_top = os.path.join(self.root, BLOBS_PREFIX)
        for folder, dirs, _files in os.walk(self.root):
            keep = []
            for d in dirs:
                path = os.path.join(folder, d)
                if path == blobs_top or os.path.islink(path):
                    continue
                if d.startswith(RESERVED_PREFIX) and _older(path, cutoff):
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                keep.append(d)
            dirs[:] = keep
        gone = 0
        for folder, _dirs, files in os.walk(self.top):
            for name in files:
                path = os.path.join(folder, name)
                if name.startswith(RESERVED_PREFIX):
                    if _older(path, cutoff):
                        remove_quietly(path)
                    continue
                gone += _unlink_if_single(path)
        if gone:
            log.info("%s: removed %d blob(s) no checkpoint holds", self.root, gone)
        return gone


def blob_dir(root: str) -> str:
    """The folder of a local storage root's blobs, ``<ab>/<hex>`` below it."""
    return os.path.join(root, BLOBS_PREFIX, BLOBS_DIGEST)


def checkpoint_shas(directory: str) -> list[str]:
    """The SHA-256s the manifest in the checkpoint ``directory`` lists; none when it
    has no readable manifest (its blobs then wait for a sweep)."""
    try:
        with open(os.path.join(directory, MANIFEST_NAME), "rb") as f:
            files = json.loads(f.read())["files"]
        shas = [str(e["sha256"]) for e in files]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [s for s in shas if len(s) == 64 and not s.strip("0123456789abcdef")]


def _unlink_if_single(path: str) -> int:
    try:
        if os.lstat(path).st_nlink != 1:
            return 0
        os.unlink(path)
    except FileNotFoundError:
        return 0
    return 1


def _older(path: str, cutoff: float) -> bool:
    try:
        return os.lstat(path).st_mtime < cutoff
    except OSError:
        return False
