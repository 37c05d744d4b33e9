"""What content-addressed checkpoints need of a storage (:class:`BlobIO`), and what
they did through it (:class:`BlobCounts`): shared by saving (:mod:`storage.blobs`) and
restoring (:mod:`storage.blobs_get`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from ._concurrency import ByteBudget
from ._files import Digest
from .manifest import Manifest, ManifestEntry

__all__ = ["BlobCounts", "BlobIO"]


@dataclass
class BlobCounts:
    """What one storage object's content-addressed saves and restores did (its own
    accounting, for benchmarks and tests): chunks written, chunks not written because
    they were known present or found present (HEAD), chunks a restore fetched or read
    from the node's copies (:mod:`storage.blob_cache`)."""

    written: int = 0
    written_bytes: int = 0
    skipped_known: int = 0
    found_present: int = 0
    #: Restores: chunks fetched from the store, and chunks read from the node's copies.
    fetched: int = 0
    restored_from_node: int = 0


@dataclass(frozen=True)
class BlobIO:
    """What content-addressed checkpoints need of a storage, bound to it (the driver's
    primitives: keys are not validated again, and the blob namespace is reachable)."""

    uri: str
    uri_for: Callable[[str], str]
    exists: Callable[[str], Awaitable[bool]]
    read: Callable[[str], Awaitable[bytes]]
    write: Callable[[str, bytes], Awaitable[None]]
    list: Callable[[str], Awaitable[list[str]]]
    delete: Callable[[str], Awaitable[None]]
    read_manifest: Callable[[str], Awaitable[Manifest]]
    verify: Callable[[str, Digest, ManifestEntry], None]
    budget: ByteBudget
    file_concurrency: int
    counts: BlobCounts
    #: Blob uploads under way through this storage object, shared by its saves: a
    #: trial's overlapping saves (and trials of one node) upload a new blob once.
    uploads: dict[str, asyncio.Future[None]]
    #: ``read_pooled(key, size)``: the object's bytes (at most ``size + 1`` of them, so
    #: a longer object shows) in a view of a recycled buffer, valid inside the ``async
    #: with`` only; for drivers that can (S3), else restores use :attr:`read`. A fresh
    #: 4 MiB ``bytes`` per chunk, joined from the response's pieces on the event loop,
    #: was a third of a restore's CPU.
    read_pooled: Callable[[str, int], AbstractAsyncContextManager[memoryview]] | None = None
