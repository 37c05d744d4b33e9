"""Content-addressed checkpoints over any storage's primitives (used on S3 and GCS).

A checkpoint's files are cut into fixed-size chunks (:data:`CHUNK_SIZE`; a file of at
most one chunk is one blob); each chunk is stored once, as the blob
``.blobs/sha256/<first two hex>/<64 hex>`` under the storage's root, and the
checkpoint's key holds only its manifest (version 2: per file, the SHA-256 of each
chunk). A chunk already stored is never uploaded again: a frozen backbone, a PBT
exploit's copy of its donor, trials fine-tuned from one base model store their bytes
once.

Why fixed-size chunks: tensor files (``torch.save``'s zip, safetensors) keep each
tensor at the same offset when shapes do not change, so a changed layer changes only
its own chunks. Content-defined chunking would find shifted content too, but costs a
rolling hash over every byte (in pure Python, far slower than the upload it saves) to
find what checkpoints rarely have.

Saving skips a chunk that is known present (the chunks of checkpoints the caller
names, which the driver keeps: the one this save follows, the trial's restore origin),
else asks the store (HEAD), else writes it; the manifest goes last, and then the blobs
HEAD found are looked for once more (one the driver deleted meanwhile is uploaded again
from the files). Loading (:mod:`storage.blobs_get`) fetches chunks of the whole
checkpoint a bounded window at a time, checks each against its SHA-256 and writes it at
its offset of the file's temporary sibling, renamed into place once complete: one pass
of hashing covers every byte. Saves keep the chunks they found stored already (content
that repeats) among the node's copies (:mod:`storage.blob_cache`), restores the chunks
they fetched; restores read there before the store. Blobs are
never deleted here: only the driver does (by reference count), and ``orphans`` finds
the blobs no manifest names (after a crash between chunk uploads and the manifest, or
in the middle of a garbage collection).

``TRIALFLOW_CHECKPOINT_DEDUP=0`` in the environment turns saving back to full copies
under the checkpoint's key (for benchmarks, and as an escape hatch); loading reads
both layouts whatever it says.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Collection, Iterable
from typing import IO, Any

from ._concurrency import in_thread, map_bounded
from ._files import LocalFile
from .blob_cache import BlobCache, node_cache
from .blob_io import BlobCounts, BlobIO
from .blobs_get import assemble
from .dedup import BLOBS_DIGEST, DEDUP_ENV, blob_key, dedup_enabled
from .errors import IntegrityError, NotFound
from .keys import BLOBS_PREFIX, join_key
from .manifest import MANIFEST_NAME, Manifest, ManifestEntry

__all__ = [
    "CHUNK_SIZE",
    "BlobCounts",
    "BlobIO",
    "DEDUP_ENV",
    "blob_key",
    "dedup_enabled",
    "delete_blobs",
    "get_chunked",
    "put_chunked",
    "orphans",
]

#: The size of every chunk but a file's last.
CHUNK_SIZE = 4 << 20


def blob_of(key: str) -> str | None:
    """The SHA-256 a blob key names, or None if ``key`` is not a blob's."""
    parts = key.split("/")
    if len(parts) == 4 and parts[:2] == [BLOBS_PREFIX, BLOBS_DIGEST] and len(parts[3]) == 64:
        if parts[2] == parts[3][:2]:
            return parts[3]
    return None


async def put_chunked(
    store: BlobIO, files: list[LocalFile], key: str, known: Collection[str] = ()
) -> Manifest:
    """Store ``files`` (already scanned) as blobs and commit the manifest at ``key``
    (version 2). ``known``: SHA-256s of blobs the caller knows are stored."""
    present: set[str] = set(known)
    counts = store.counts
    cache = node_cache()
    writing = store.uploads  # one PUT per blob, even if repeated or saved twice at once
    found: dict[str, tuple[str, int, int]] = {}  # found stored (HEAD): where the bytes are

    async def ensure(sha: str, data: bytes, where: tuple[str, int]) -> None:
        if sha in present:
            counts.skipped_known += 1
            return
        while (pending := writing.get(sha)) is not None:  # another save uploads it
            try:
                await asyncio.shield(pending)
            except asyncio.CancelledError:
                if not pending.cancelled():
                    raise  # this save was cancelled
                continue  # that upload failed: this save tries
            present.add(sha)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        writing[sha] = fut
        try:
            blob = blob_key(sha)
            if await store.exists(blob):
                counts.found_present += 1
                found[sha] = (*where, len(data))
                if cache is not None:  # stored before: content that repeats
                    await in_thread(cache.put, sha, data)
            else:
                await store.write(blob, data)
                counts.written += 1
                counts.written_bytes += len(data)
            present.add(sha)
            fut.set_result(None)
        except BaseException:
            fut.cancel()  # a waiting save tries itself
            raise
        finally:
            if writing.get(sha) is fut:
                del writing[sha]

    async def one(f: LocalFile) -> ManifestEntry:
        fh = await asyncio.to_thread(open, f.path, "rb")
        whole = hashlib.sha256()
        chunks: list[str] = []
        tasks: list[asyncio.Task[None]] = []
        size = 0
        try:
            while True:
                grant = await store.budget.acquire(CHUNK_SIZE)
                try:
                    data, sha = await in_thread(_read_chunk, fh, whole, cache, present)
                except BaseException:
                    store.budget.release(grant)
                    raise
                if not data:  # end of file (an empty file has no chunks)
                    store.budget.release(grant)
                    break
                where = (f.path, size)
                size += len(data)
                chunks.append(sha)
                upload = ensure(sha, data, where)
                tasks.append(asyncio.ensure_future(_released(upload, store, grant)))
                for t in tasks:  # stop reading once a chunk has failed
                    if t.done() and not t.cancelled() and t.exception() is not None:
                        raise t.exception()  # type: ignore[misc]
                if len(data) < CHUNK_SIZE:
                    break
            await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            await asyncio.to_thread(fh.close)
        return ManifestEntry(f.rel, size, whole.hexdigest(), tuple(chunks))

    entries = await map_bounded(one, files, store.file_concurrency)
    manifest = Manifest(
        key=key, files=tuple(entries), uri=store.uri_for(key), chunk_size=CHUNK_SIZE
    )
    await store.write(join_key(key, MANIFEST_NAME), manifest.to_json())
    await _still_there(store, found)
    return manifest


async def _still_there(store: BlobIO, found: dict[str, tuple[str, int, int]]) -> None:
    """The blobs a save found stored (and did not upload) are still there once its
    manifest is written, or are uploaded again from the files: the driver's collector
    may have deleted one meanwhile (it had just found no checkpoint naming it). Any
    deletion that lands later was decided before this save could name the blob, and
    the driver checks for it (``orchestrator.engine.blob_refs``)."""

    async def check(item: tuple[str, tuple[str, int, int]]) -> None:
        sha, (path, offset, size) = item
        if await store.exists(blob_key(sha)):
            return
        async with store.budget.hold(size):
            data = await in_thread(_read_at, path, offset, size)
            if len(data) != size or await in_thread(_sha, data) != sha:
                raise IntegrityError(
                    f"{path!r} changed while it was being saved; save it again",
                    uri=store.uri,
                )
            await store.write(blob_key(sha), data)
        store.counts.written += 1
        store.counts.written_bytes += size

    await map_bounded(check, list(found.items()), 8)


def _read_at(path: str, offset: int, size: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(offset)
        return fh.read(size)


async def _released(coro: Awaitable[None], store: BlobIO, grant: int) -> None:
    try:
        await coro
    finally:
        store.budget.release(grant)


def _read_chunk(
    fh: IO[bytes], whole: Any, cache: BlobCache | None, present: Collection[str]
) -> tuple[bytes, str]:
    """Blocking: the next chunk of ``fh`` and its SHA-256, the file's hash updated. A
    chunk known to be stored already (content that repeats: a frozen backbone, a base
    model) is kept among the node's copies, for the restores of this node; a new one
    is not (most of a model that trains changes at every save: copying it would double
    the disk writes of saves for copies that are rarely read)."""
    data = fh.read(CHUNK_SIZE)
    whole.update(data)
    sha = hashlib.sha256(data).hexdigest()
    if cache is not None and data and sha in present:
        cache.put(sha, data)
    return data, sha


def blob_root(key: str, manifest: Manifest) -> str:
    """Where the blobs of the checkpoint read at ``key`` are: under the root of the
    storage that wrote it, which the manifest's own key tells (a reader may have
    opened the storage above it: ``key`` is then ``<path>/<manifest.key>``)."""
    if key == manifest.key:
        return ""
    if key.endswith("/" + manifest.key):
        return key[: -len(manifest.key) - 1]
    return ""


async def get_chunked(store: BlobIO, key: str, manifest: Manifest, target: str) -> None:
    """Assemble every file of the version-2 ``manifest`` (read at ``key``) under
    ``target``; a file appears whole and checked or not at all. Every chunk is checked
    against its SHA-256 (one pass of hashing over the checkpoint), chunks of the whole
    checkpoint are fetched a bounded window at a time, and the node's own copies of
    chunks are used first: see :mod:`storage.blobs_get`."""
    await assemble(store, key, manifest, target, blob_root(key, manifest))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def orphans(store: BlobIO, *, keep: Iterable[str] = ()) -> list[str]:
    """The SHA-256 of every blob that no committed checkpoint's manifest names, nor
    ``keep``. Blobs are listed before manifests are read: a save that commits between
    the two cannot make its blobs look orphaned."""
    stored = {sha for k in await store.list(BLOBS_PREFIX) if (sha := blob_of(k))}
    if not stored:
        return []
    named: set[str] = set(keep)
    suffix = "/" + MANIFEST_NAME
    manifests = [k[: -len(suffix)] for k in await store.list("") if k.endswith(suffix)]

    async def read(key: str) -> None:
        try:
            named.update((await store.read_manifest(key)).blobs())
        except NotFound:
            pass

    await map_bounded(read, manifests, 16)
    return sorted(stored - named)


async def delete_blobs(store: BlobIO, shas: Iterable[str]) -> None:
    """Delete these blobs (gone already is fine): for the driver, which alone knows
    that no kept checkpoint names them."""
    await map_bounded(lambda sha: store.delete(blob_key(sha)), sorted(set(shas)), 8)
