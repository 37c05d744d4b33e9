"""Which blobs of content-addressed checkpoints the driver may delete, and which saves
it must check: reference counts, kept by the driver alone (pure bookkeeping, no I/O).

On S3 and GCS a checkpoint's manifest names blobs that other checkpoints may name too
(see ``storage.blobs``). Only the driver deletes blobs: it counts, per blob, the
checkpoints it holds (committed, not yet collected) whose manifests name it; when the
collector deletes a checkpoint (its manifest first), the blobs whose count falls to 0
go after it.

The race: a save that found blob X stored (a HEAD, or the driver said its trial's
newest checkpoint names X), then the collector deleted X, then the save committed a
manifest naming X. It is common, not rare: small files repeat across trials (a step
counter at the same iteration), and an exploit drops a trial's checkpoints while the
others save. So the collector first waits (:class:`CheckpointCollector`): for a moment
with no save under way (a while at most), else for the saves that started before the
blob was doomed; a save that names the blob meanwhile holds it again, and it stays.
Each finished blob deletion and each save's start get a sequence
number; a save whose manifest names a blob being deleted, or deleted after the save
started, is a *suspect*: those blobs are checked (once their deletions finish) and,
if one is gone, the save is failed (the trial keeps its older checkpoint). Deletions
are remembered only while a save that started before them is in flight.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["BlobRefs", "blobs_of"]


def blobs_of(manifest: Mapping[str, Any] | None) -> frozenset[str]:
    """The blobs a manifest (as a dict) names: none for a full copy (version 1)."""
    if not manifest or manifest.get("version") != 2:
        return frozenset()
    return frozenset(
        sha for entry in manifest.get("files", ()) for sha in entry.get("chunks") or ()
    )


class BlobRefs:
    """The driver's counts of blob references (see the module docstring)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._held: dict[str, frozenset[str]] = {}  # checkpoint key -> its blobs
        self._seq = 0
        self._started: dict[str, int] = {}  # saves in flight: key -> start seq
        self._deleted: dict[str, int] = {}  # blob -> seq of its latest finished deletion
        self._deleting: Counter[str] = Counter()  # blobs with a deletion under way

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    # -- saves ------------------------------------------------------------------------

    def save_started(self, key: str) -> None:
        """A save of ``key`` is under way: from now on it may find (and count on) a blob
        that the collector then deletes."""
        self._started[key] = self._next()

    def save_ended(self, key: str, manifest: Mapping[str, Any] | None) -> frozenset[str]:
        """The save of ``key`` committed ``manifest`` (None: it failed). Returns the
        blobs it names that were deleted since it started (check those before holding
        it); empty: nothing to check, hold it now."""
        start = self._started.pop(key, None)
        suspects: frozenset[str] = frozenset()
        if start is not None and manifest is not None:
            suspects = frozenset(
                sha
                for sha in blobs_of(manifest)
                if sha in self._deleting or self._deleted.get(sha, -1) > start
            )
        self._forget_old_deletions()
        return suspects

    # -- checkpoints ------------------------------------------------------------------

    def hold(self, key: str, manifest: Mapping[str, Any] | None) -> None:
        """Count the blobs of checkpoint ``key`` (committed, kept until collected)."""
        if key in self._held:
            return
        blobs = blobs_of(manifest)
        if blobs:
            self._held[key] = blobs
            self._counts.update(blobs)

    def release(self, key: str, manifest: Mapping[str, Any] | None = None) -> frozenset[str]:
        """Checkpoint ``key``'s manifest is deleted: its blobs that no held checkpoint
        names any more (doomed: the caller waits for the saves that may name them, then
        calls :meth:`begin_delete`). A key never held (committed after its trial was
        given up) is released with the blobs of ``manifest``."""
        blobs = self._held.pop(key, None)
        if blobs is None:
            blobs = blobs_of(manifest)
        else:
            self._counts.subtract(blobs)
        dead = frozenset(sha for sha in blobs if self._counts[sha] <= 0)
        for sha in dead:
            self._counts.pop(sha, None)
        return dead

    def begin_delete(self, blobs: Iterable[str]) -> frozenset[str]:
        """Of these doomed blobs, those no checkpoint held again meanwhile: the caller
        deletes them now, then calls :meth:`deleted`."""
        gone = frozenset(sha for sha in blobs if self._counts[sha] <= 0)
        self.deleting(gone)
        return gone

    def deleting(self, blobs: Iterable[str]) -> None:
        """These blobs are being deleted (by the collector, or an orphan sweep);
        :meth:`deleted` follows, whatever the outcome."""
        self._deleting.update(blobs)

    def deleted(self, blobs: Iterable[str]) -> None:
        """The deletion of these blobs is over (done, or given up)."""
        blobs = list(blobs)
        self._deleting.subtract(blobs)
        self._deleting = +self._deleting  # drop the zeros
        if not self._started:
            return  # no save in flight could have counted on them
        seq = self._next()
        for sha in blobs:
            self._deleted[sha] = seq

    def being_deleted(self, sha: str) -> bool:
        return sha in self._deleting

    def now(self) -> int:
        """A point in the sequence of save starts and deletions."""
        return self._next()

    def saves_in_flight(self, *, started_before: int | None = None) -> int:
        """Saves under way (those that started before ``started_before``)."""
        if started_before is None:
            return len(self._started)
        return sum(1 for seq in self._started.values() if seq < started_before)

    def held(self) -> frozenset[str]:
        """Every blob a held checkpoint names."""
        return frozenset(self._counts)

    def count(self, sha: str) -> int:
        return self._counts[sha]

    def _forget_old_deletions(self) -> None:
        """Deletions older than every save in flight can no longer make a suspect."""
        if not self._deleted:
            return
        oldest = min(self._started.values(), default=None)
        if oldest is None:
            self._deleted.clear()
        elif len(self._deleted) > 64:
            self._deleted = {sha: seq for sha, seq in self._deleted.items() if seq > oldest}
