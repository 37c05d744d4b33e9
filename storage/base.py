"""The storage contract: one small all-async interface, and the checkpoint protocol
written once on top of it.

A driver implements the underscore primitives (bytes, listing, deletion, streaming one
file up or down). This class validates keys, opens the driver lazily, and builds the
directory and checkpoint operations from those primitives, so the commit protocol
(files first, manifest last; manifest deleted first) and its verification are the same
on every backend. Drivers may override a public method where the backend can do better
(the local driver stages a checkpoint and renames it into place). The conditional
writes leases stand on are in :mod:`storage.conditional`.
"""

from __future__ import annotations

import abc
import asyncio
import builtins
import hashlib
import logging
import os
from collections.abc import Callable, Collection, Iterable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any

from . import blobs
from ._concurrency import ByteBudget, map_bounded
from ._files import Digest, LocalFile, scan_dir, write_file
from .conditional import ConditionalWrites, Versioned
from .errors import IntegrityError, InvalidKey, NotFound, StorageError
from .keys import join_key, local_path, validate_key, validate_prefix
from .manifest import MANIFEST_NAME, Manifest, ManifestEntry
from .retry import RetryPolicy

__all__ = ["Storage", "Versioned"]

log = logging.getLogger("trialflow.storage")

MiB = 1 << 20


class Storage(ConditionalWrites):
    """A place to keep bytes under ``/``-separated keys relative to :attr:`uri`.

    Use as ``async with open_storage(uri) as st:``, or call methods directly (the
    driver opens on first use) and ``await st.aclose()``. Instances belong to one event
    loop and are safe to use from many tasks of it at once.

    Tuning (all drivers): ``part_size`` is the unit of a multipart/resumable upload;
    ``max_concurrency * part_size`` bytes is the most that uploads keep in memory at any
    time (all files together); ``file_concurrency`` bounds files in flight;
    ``multipart_threshold`` is the size from which a file is sent in parts; ``retry``
    bounds retries of transient failures.
    """

    scheme: str = ""
    #: Whether :meth:`put_checkpoint` stores chunks as shared blobs (S3, GCS: see
    #: :mod:`storage.blobs`) unless ``TRIALFLOW_CHECKPOINT_DEDUP=0``.
    content_addressed: bool = False
    #: A driver's pooled read for restores, if it has one (see ``BlobIO.read_pooled``).
    _read_pooled: Callable[[str, int], AbstractAsyncContextManager[memoryview]] | None = None

    def __init__(
        self,
        uri: str,
        *,
        part_size: int = 8 * MiB,
        max_concurrency: int = 10,
        file_concurrency: int = 16,
        multipart_threshold: int | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        if part_size <= 0 or max_concurrency <= 0 or file_concurrency <= 0:
            raise ValueError("part_size, max_concurrency and file_concurrency must be > 0")
        self._uri = uri.rstrip("/") if uri != "/" else uri
        self.part_size = part_size
        self.max_concurrency = max_concurrency
        self.file_concurrency = file_concurrency
        self.multipart_threshold = part_size if multipart_threshold is None else multipart_threshold
        self.retry = retry or RetryPolicy()
        self._budget = ByteBudget(part_size * max_concurrency)
        self._open_lock = asyncio.Lock()
        self._opened = False
        self._closed = False
        self._cleanups: set[asyncio.Task[None]] = set()
        #: What content-addressed saves through this object wrote and skipped.
        self.blob_counts = blobs.BlobCounts()
        self._blob_uploads: dict[str, asyncio.Future[None]] = {}

    # -- identity ---------------------------------------------------------------------

    @property
    def uri(self) -> str:
        """The root URI, e.g. ``s3://bucket/prefix`` or ``file:///abs/path``."""
        return self._uri

    def uri_for(self, key: str) -> str:
        """The full URI of ``key`` (an absolute path for the local driver)."""
        key = validate_prefix(key, uri=self.uri, root=True)
        return join_key(self.uri, key) if key else self.uri

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r})"

    # -- lifecycle --------------------------------------------------------------------

    async def __aenter__(self) -> Storage:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def open(self) -> None:
        """Connect and check that the bucket (or root directory) exists; idempotent.

        Raises ``BucketNotFound`` rather than creating anything."""
        if self._opened:
            return
        async with self._open_lock:
            if self._closed:
                raise StorageError("storage is closed", uri=self.uri)
            if not self._opened:
                await self._open()
                self._opened = True

    async def aclose(self) -> None:
        """Finish background cleanups (aborting failed uploads), then release
        connections. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._cleanups:
            await asyncio.gather(*list(self._cleanups), return_exceptions=True)
        if self._opened:
            self._opened = False
            await self._close()

    async def _ready(self) -> None:
        if not self._opened:
            await self.open()

    # -- bytes and keys ---------------------------------------------------------------

    async def write_bytes(self, key: str, data: bytes) -> None:
        """Store ``data`` at ``key``, replacing it atomically: readers see the old or the
        new bytes, never a mix or a prefix."""
        key = validate_key(key, uri=self.uri, root=True)
        await self._ready()
        await self._write_bytes(key, bytes(data))

    async def read_bytes(self, key: str) -> bytes:
        """The bytes at ``key``; ``NotFound`` if there are none."""
        key = validate_key(key, uri=self.uri, root=True)
        await self._ready()
        return await self._read_bytes(key)

    async def exists(self, key: str) -> bool:
        """Whether an object (a file, not a directory-like prefix) is stored at ``key``."""
        key = validate_key(key, uri=self.uri, root=True)
        await self._ready()
        return await self._exists(key)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Sorted keys equal to ``prefix`` or below ``prefix/`` (``""``: every key).
        ``prefix`` is path-like: ``"a"`` does not match ``"ab"``."""
        prefix = validate_prefix(prefix, uri=self.uri, root=True)
        await self._ready()
        return sorted(await self._list(prefix))

    async def delete(self, prefix: str) -> None:
        """Delete ``prefix`` and everything below it; deleting nothing is not an error.
        The blob namespace may be deleted whole (replacing an experiment does)."""
        prefix = validate_prefix(prefix, uri=self.uri)
        if not prefix:
            raise InvalidKey("refusing to delete the whole storage root", uri=self.uri)
        await self._ready()
        await self._delete(prefix)

    # -- directories ------------------------------------------------------------------

    async def upload_dir(
        self, local_dir: str | os.PathLike[str], key: str
    ) -> builtins.list[ManifestEntry]:
        """Upload every file under ``local_dir`` to ``key/<relative path>``, streaming,
        many at once; return what was sent (sizes and SHA-256)."""
        key = validate_prefix(key, uri=self.uri, root=True)
        await self._ready()
        files = await asyncio.to_thread(scan_dir, os.fspath(local_dir), uri=self.uri, key=key)
        return await self._upload_files(files, key)

    async def download_dir(self, key: str, local_dir: str | os.PathLike[str]) -> builtins.list[str]:
        """Download every key below ``key/`` into ``local_dir`` (created if needed);
        return the relative paths written. Each file appears whole or not at all."""
        key = validate_prefix(key, uri=self.uri, root=True)
        await self._ready()
        base = f"{key}/" if key else ""
        rels = [k[len(base) :] for k in await self._list(key) if k.startswith(base)]
        for rel in rels:
            self._check_stored_key(rel, key)
        target = os.fspath(local_dir)

        async def one(rel: str) -> str:
            await self._download_file(join_key(key, rel), local_path(target, rel), None)
            return rel

        await asyncio.to_thread(os.makedirs, target, exist_ok=True)
        return await map_bounded(one, rels, self.file_concurrency)

    # -- checkpoints ------------------------------------------------------------------

    async def put_checkpoint(
        self, local_dir: str | os.PathLike[str], key: str, *, known: Collection[str] = ()
    ) -> Manifest:
        """Persist ``local_dir`` as the checkpoint ``key`` and return its manifest.

        Files go first, the manifest last: until this returns, ``key`` is not a
        checkpoint (``list_checkpoints`` does not show it, ``get_checkpoint`` raises
        ``NotFound``). An existing checkpoint at ``key`` is invalidated first. On failure
        or cancellation, partial uploads are aborted and what was written is removed
        (blobs of a content-addressed store stay, for the driver's collector or
        ``sweep_orphan_blobs``). ``known``: SHA-256s of blobs known to be stored, which a
        content-addressed store does not check for again."""
        key = validate_key(key, uri=self.uri, root=True)
        await self._ready()
        files = await asyncio.to_thread(scan_dir, os.fspath(local_dir), uri=self.uri, key=key)
        if any(f.rel == MANIFEST_NAME for f in files):
            raise InvalidKey(f"{MANIFEST_NAME} is reserved", uri=self.uri, key=key)
        await self._delete_checkpoint(key)
        if self.content_addressed and blobs.dedup_enabled():
            try:
                return await blobs.put_chunked(self._blob_io(), files, key, known)
            except BaseException:
                await self._cleanup(self._delete(key), f"removing partial checkpoint {key!r}")
                raise
        try:
            entries = await self._upload_files(files, key)
            manifest = Manifest(key=key, files=tuple(entries), uri=self.uri_for(key))
            await self._write_bytes(join_key(key, MANIFEST_NAME), manifest.to_json())
        except BaseException:
            await self._cleanup(self._delete(key), f"removing partial checkpoint {key!r}")
            raise
        return manifest

    async def get_checkpoint(self, key: str, local_dir: str | os.PathLike[str]) -> Manifest:
        """Download the committed checkpoint ``key`` into ``local_dir`` and verify every
        file's size and SHA-256 against its manifest.

        Raises ``NotFound`` if there is no committed checkpoint, ``IntegrityError`` if a
        file differs (files that did verify are in place; do not use the directory)."""
        key = validate_key(key, uri=self.uri, root=True)
        manifest = await self.read_manifest(key)
        target = os.fspath(local_dir)
        if manifest.chunk_size is not None:
            await blobs.get_chunked(self._blob_io(), key, manifest, target)
            return manifest
        await asyncio.to_thread(os.makedirs, target, exist_ok=True)

        async def one(entry: ManifestEntry) -> None:
            await self._download_file(
                join_key(key, entry.path), local_path(target, entry.path), entry
            )

        await map_bounded(one, manifest.files, self.file_concurrency)
        return manifest

    async def read_manifest(self, key: str) -> Manifest:
        """The manifest of the committed checkpoint ``key``; ``NotFound`` if none."""
        key = validate_key(key, uri=self.uri, root=True)
        await self._ready()
        try:
            raw = await self._read_bytes(join_key(key, MANIFEST_NAME))
        except NotFound as err:
            raise NotFound("no committed checkpoint", uri=self.uri, key=key) from err
        return Manifest.from_json(raw, uri=self.uri_for(key))

    async def sweep_blobs(self) -> int:
        """Remove content-addressed blobs no checkpoint holds (what a crash mid-save or
        mid-delete left); how many went. Run under the experiment's lease."""
        return 0

    async def list_checkpoints(self, prefix: str = "") -> builtins.list[str]:
        """Keys of every committed checkpoint at or below ``prefix``, at any depth."""
        prefix = validate_prefix(prefix, uri=self.uri, root=True)
        await self._ready()
        suffix = "/" + MANIFEST_NAME
        return sorted(k[: -len(suffix)] for k in await self._list(prefix) if k.endswith(suffix))

    async def delete_checkpoint(self, key: str) -> None:
        """Un-commit (delete the manifest), then delete the files. A crash in between
        leaves only unlisted garbage, never a checkpoint with missing files. The blobs a
        content-addressed checkpoint names stay: other checkpoints may name them too
        (the driver deletes those no kept checkpoint names)."""
        key = validate_key(key, uri=self.uri, root=True)
        await self._ready()
        await self._delete_checkpoint(key)

    # -- blobs of content-addressed checkpoints (see storage.blobs) -------------------

    async def has_blob(self, sha256: str) -> bool:
        """Whether the blob of this SHA-256 is stored (for the driver's check that a
        save's manifest names no blob its collector deleted meanwhile)."""
        await self._ready()
        return await self._exists(blobs.blob_key(sha256))

    async def delete_blobs(self, sha256s: Iterable[str]) -> None:
        """Delete these blobs. Only for the driver, which alone knows (by counting the
        kept checkpoints that name each) that no checkpoint needs them."""
        await self._ready()
        await blobs.delete_blobs(self._blob_io(), sha256s)

    async def orphan_blobs(self, *, keep: Iterable[str] = ()) -> builtins.list[str]:
        """The SHA-256 of every blob no committed checkpoint names, nor ``keep``."""
        await self._ready()
        return await blobs.orphans(self._blob_io(), keep=keep)

    async def sweep_orphan_blobs(self, *, keep: Iterable[str] = ()) -> builtins.list[str]:
        """Delete every blob no committed checkpoint names, nor ``keep``; the SHA-256s
        deleted. Only where no save can commit meanwhile (``repair``); a driver with
        saves in flight deletes :meth:`orphan_blobs` itself, checking those saves."""
        found = await self.orphan_blobs(keep=keep)
        await blobs.delete_blobs(self._blob_io(), found)
        return found

    def _blob_io(self) -> blobs.BlobIO:
        return blobs.BlobIO(
            uri=self.uri,
            uri_for=self.uri_for,
            exists=self._exists,
            read=self._read_bytes,
            write=self._write_bytes,
            list=self._list,
            delete=self._delete,
            read_manifest=self.read_manifest,
            verify=self._verify,
            budget=self._budget,
            file_concurrency=self.file_concurrency,
            counts=self.blob_counts,
            uploads=self._blob_uploads,
            read_pooled=self._read_pooled,
        )

    async def _delete_checkpoint(self, key: str) -> None:
        await self._delete(join_key(key, MANIFEST_NAME))
        await self._delete(key)

    # -- helpers for drivers ----------------------------------------------------------

    async def _upload_files(
        self, files: builtins.list[LocalFile], key: str
    ) -> builtins.list[ManifestEntry]:
        async def one(f: LocalFile) -> ManifestEntry:
            digest = await self._upload_file(f.path, join_key(key, f.rel), f.size)
            return ManifestEntry(f.rel, digest.size, digest.sha256)

        return await map_bounded(one, files, self.file_concurrency)

    def _verify(self, key: str, got: Digest, expected: ManifestEntry | None) -> None:
        if expected is None:
            return
        if got.size != expected.size:
            raise IntegrityError(
                f"size {got.size} does not match the manifest's {expected.size}",
                uri=self.uri,
                key=key,
            )
        if got.sha256 != expected.sha256:
            raise IntegrityError("SHA-256 does not match the manifest", uri=self.uri, key=key)

    def _write_verified(self, key: str, path: str, data: bytes, expected: ManifestEntry) -> None:
        """Blocking: verify in-memory ``data`` against ``expected``, then write it to
        ``path`` via a temporary sibling (for small files fetched whole)."""
        self._verify(key, Digest(len(data), hashlib.sha256(data).hexdigest()), expected)
        write_file(path, data)

    def _check_stored_key(self, rel: str, base: str) -> None:
        """Keys read back from a store written by someone else may be unsafe as paths."""
        try:
            validate_key(rel)
        except InvalidKey as err:
            raise StorageError(
                f"stored key {rel!r} cannot be a local path", uri=self.uri, key=base
            ) from err

    async def _cleanup(self, coro: Any, what: str) -> None:
        """Await a cleanup that must finish even if the caller is cancelled (again)
        meanwhile: it runs as a shielded task that ``aclose`` also waits for."""
        await asyncio.shield(self._in_background(coro, what))

    def _in_background(self, coro: Any, what: str) -> asyncio.Task[None]:
        """Run a cleanup as an owned task: ``aclose`` waits for it, and its failure is
        logged, not lost."""

        async def guarded() -> None:
            try:
                await coro
            except Exception as err:
                log.warning("storage cleanup failed (%s): %s", what, err)

        task = asyncio.ensure_future(guarded())
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)
        return task

    # -- driver primitives ------------------------------------------------------------

    @abc.abstractmethod
    async def _open(self) -> None: ...

    @abc.abstractmethod
    async def _close(self) -> None: ...

    @abc.abstractmethod
    async def _write_bytes(self, key: str, data: bytes) -> None: ...

    @abc.abstractmethod
    async def _read_bytes(self, key: str) -> bytes: ...

    @abc.abstractmethod
    async def _exists(self, key: str) -> bool: ...

    @abc.abstractmethod
    async def _list(self, prefix: str) -> builtins.list[str]:
        """Keys equal to ``prefix`` or below ``prefix/``; every key if ``prefix == ""``."""

    @abc.abstractmethod
    async def _delete(self, prefix: str) -> None:
        """Delete the key ``prefix`` and every key below ``prefix/``."""

    @abc.abstractmethod
    async def _upload_file(self, path: str, key: str, size: int) -> Digest:
        """Stream one local file to ``key``; return its size and SHA-256 as read."""

    @abc.abstractmethod
    async def _download_file(self, key: str, path: str, expected: ManifestEntry | None) -> None:
        """Stream ``key`` to ``path`` via a temporary sibling, calling :meth:`_verify`
        before the rename, so ``path`` only ever holds complete (verified) data."""
