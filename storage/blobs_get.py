"""Restoring a content-addressed checkpoint: every file assembled from its chunks.

What a restore costs against a full copy's, and why this shape (issue 36 asks a restore
to be no slower than one of a full copy):

- **Chunks, not files, are the unit of concurrency.** Up to :data:`WINDOW` chunks of
  the whole checkpoint are in flight at once (and no more bytes than the storage's
  budget), whatever the files: a 52 MiB model file is 13 requests where a full copy
  streams it in one, and fetching them one file-window at a time left the connection
  pool idle while each chunk waited for the one before it to be written.
- **Each chunk lands at its offset** (``pwrite`` to the file's temporary sibling) as
  soon as it has arrived and checked, in any order, on a worker thread, so two cores
  hash two chunks at once.
- **One hash per byte.** Each chunk is checked against its own SHA-256, the name the
  manifest gives it, which covers every byte of the file (the manifest's chunks cover
  its size exactly): the file's whole SHA-256 would hash every byte a second time. A
  bad or missing chunk is named as it is found.
- **The node's copies first** (:mod:`storage.blob_cache`): a chunk this node already
  holds (its trials saved the same frozen backbone, or it restored it before) is read
  from its disk, checked the same way, instead of fetched; a chunk fetched is kept
  there for the next restore.

A file appears at its path whole and checked, or not at all (it is renamed into place
once every chunk is written); a failure or cancellation removes the temporary files.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Awaitable

from ._concurrency import in_thread, map_bounded
from ._files import remove_quietly, temp_sibling
from .blob_cache import BlobCache, node_cache
from .blob_io import BlobIO
from .dedup import blob_key
from .errors import IntegrityError, NotFound
from .keys import BLOBS_PREFIX, join_key, local_path
from .manifest import Manifest, ManifestEntry

__all__ = ["WINDOW", "assemble", "window"]

#: The most chunks of one checkpoint in flight at once (fetched, checked or written).
WINDOW = 8


async def assemble(
    store: BlobIO,
    key: str,
    manifest: Manifest,
    target: str,
    root: str,
) -> None:
    """Assemble every file of the version-2 ``manifest`` (read at ``key``; its blobs
    under ``root``) in ``target``. See the module."""
    assert manifest.chunk_size is not None
    chunk_size = manifest.chunk_size
    cache = node_cache()
    limit = window(store, chunk_size)
    gate = asyncio.Semaphore(limit)
    counts = store.counts

    def bad(entry: ManifestEntry, index: int, sha: str, what: str) -> IntegrityError:
        return IntegrityError(
            f"blob {sha[:12]}... of {entry.path!r} (chunk {index}) {what}",
            uri=store.uri,
            key=key,
        )

    async def chunk(fd: int, entry: ManifestEntry, index: int, sha: str) -> None:
        size = min(chunk_size, entry.size - index * chunk_size)
        offset = index * chunk_size
        async with gate:
            grant = await store.budget.acquire(size)
            try:
                if cache is not None and await in_thread(_from_cache, cache, sha, size, fd, offset):
                    counts.restored_from_node += 1
                    return
                blob = join_key(root, blob_key(sha))
                try:
                    if store.read_pooled is None:
                        ok = await _fetch(store.read(blob), sha, size, fd, offset, cache)
                    else:
                        async with store.read_pooled(blob, size) as view:
                            ok = await _write(view, sha, size, fd, offset, cache)
                except NotFound as err:
                    raise bad(
                        entry,
                        index,
                        sha,
                        f"is missing from {BLOBS_PREFIX}: the checkpoint cannot be "
                        "restored; use an older one",
                    ) from err
                counts.fetched += 1
                if not ok:
                    raise bad(entry, index, sha, "does not match its SHA-256")
            finally:
                store.budget.release(grant)

    async def one(entry: ManifestEntry) -> None:
        path = local_path(target, entry.path)
        fd, tmp = await in_thread(_open_temp, path)
        committed = False
        try:
            chunks = list(enumerate(entry.chunks or ()))
            await map_bounded(lambda ic: chunk(fd, entry, ic[0], ic[1]), chunks, limit)
            await in_thread(os.replace, tmp, path)  # complete: in place (still open)
            committed = True
        finally:
            await asyncio.shield(in_thread(_close, fd, None if committed else tmp))

    await asyncio.to_thread(os.makedirs, target, exist_ok=True)
    await map_bounded(one, manifest.files, store.file_concurrency)


async def _fetch(
    read: Awaitable[bytes], sha: str, size: int, fd: int, offset: int, cache: BlobCache | None
) -> bool:
    return await _write(await read, sha, size, fd, offset, cache)


async def _write(
    data: bytes | memoryview, sha: str, size: int, fd: int, offset: int, cache: BlobCache | None
) -> bool:
    """A fetched chunk written at ``offset`` if it is the one named; False if not."""
    return len(data) == size and await in_thread(_write_checked, data, sha, fd, offset, cache)


def window(store: BlobIO, chunk_size: int) -> int:
    """How many chunks of one checkpoint a restore through ``store`` has in flight at
    most: :data:`WINDOW`, fewer if the storage's byte budget holds fewer chunks."""
    return max(1, min(WINDOW, store.budget.capacity // chunk_size))


def _open_temp(path: str) -> tuple[int, str]:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = temp_sibling(path)
    return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644), tmp


def _pwrite_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def _from_cache(cache: BlobCache, sha: str, size: int, fd: int, offset: int) -> bool:
    """Blocking: the node's checked copy of the chunk written at ``offset``; False if
    the node has none."""
    data = cache.get(sha, size)
    if data is None:
        return False
    _pwrite_all(fd, data, offset)
    return True


def _write_checked(data: bytes, sha: str, fd: int, offset: int, cache: BlobCache | None) -> bool:
    """Blocking: a fetched chunk, if its bytes hash to ``sha``, written at ``offset``
    (and kept for the node); False if they do not."""
    if hashlib.sha256(data).hexdigest() != sha:
        return False
    _pwrite_all(fd, data, offset)
    if cache is not None:
        cache.put(sha, data)
    return True


def _close(fd: int, leftover: str | None) -> None:
    os.close(fd)
    if leftover is not None:
        remove_quietly(leftover)
