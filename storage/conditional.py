"""Conditional writes, the part of the storage contract that leases stand on: of racing
writers, one wins.

Built on what each backend offers for it (S3: If-None-Match / If-Match on the ETag;
GCS: ifGenerationMatch; a local or NFS directory: a hard link of a complete file, which
link() refuses where a name exists, and a rename under a POSIX lock). A request retried
after its answer was lost may find its own write and be told "another version": so a
refused write whose key holds exactly ``data`` counts as this caller's. Callers that
must tell writers apart put something unique in ``data``. A version may name the
content (an S3 ETag, a local hash): a write of the very bytes already stored can keep
it. Meant for small objects (locks, leases): the bytes go in one request.

:class:`~storage.base.Storage` has these methods from :class:`ConditionalWrites`; a
driver implements its four primitives.
"""

from __future__ import annotations

import abc
from typing import NamedTuple

from .errors import NotFound
from .keys import validate_key

__all__ = ["ConditionalWrites", "Versioned"]


class Versioned(NamedTuple):
    """Bytes as stored, with the version they were read at: opaque, compared only for
    equality (an S3 ETag, a GCS generation, a hash of the content on a local disk)."""

    data: bytes
    version: str


class ConditionalWrites(abc.ABC):
    """The conditional writes of :class:`~storage.base.Storage` (which gives ``uri`` and
    ``_ready``), built on the driver's four primitives below."""

    @property
    @abc.abstractmethod
    def uri(self) -> str: ...

    @abc.abstractmethod
    async def _ready(self) -> None: ...

    async def write_bytes_if_absent(self, key: str, data: bytes) -> str | None:
        """Store ``data`` at ``key`` only if nothing is stored there; its version, or
        None (nothing written) when the key exists. Of many writers racing for one key,
        exactly one gets a version; readers never see a partial object."""
        key = validate_key(key, uri=self.uri, root=True)
        await self._ready()
        data = bytes(data)
        version = await self._write_bytes_if_absent(key, data)
        return version if version is not None else await self._own_write(key, data)

    async def read_bytes_versioned(self, key: str) -> Versioned:
        """The bytes at ``key`` and the version they were read at; ``NotFound`` if none."""
        key = validate_key(key, uri=self.uri, root=True)
        await self._ready()
        return await self._read_bytes_versioned(key)

    async def replace_bytes_if(self, key: str, data: bytes, version: str) -> str | None:
        """Replace the bytes at ``key`` only if it still holds ``version``; the new
        version, or None (nothing written) when it holds another one or none. Of many
        writers replacing one version, exactly one wins."""
        key = validate_key(key, uri=self.uri, root=True)
        await self._ready()
        data = bytes(data)
        new = await self._replace_bytes_if(key, data, version)
        return new if new is not None else await self._own_write(key, data)

    async def delete_if(self, key: str, version: str) -> bool:
        """Delete ``key`` only if it still holds ``version``. True when the key is gone
        (deleted now, or not there); False when it holds another version, left as is."""
        key = validate_key(key, uri=self.uri, root=True)
        await self._ready()
        return await self._delete_if(key, version)

    async def _own_write(self, key: str, data: bytes) -> str | None:
        """After a refused conditional write: the key's version if it holds exactly
        ``data`` (this caller's write, answered as a refusal after a retry), else None."""
        try:
            current = await self._read_bytes_versioned(key)
        except NotFound:
            return None
        return current.version if current.data == data else None

    # -- driver primitives ------------------------------------------------------------

    @abc.abstractmethod
    async def _write_bytes_if_absent(self, key: str, data: bytes) -> str | None:
        """One atomic create-if-absent; the new version, or None if the key exists."""

    @abc.abstractmethod
    async def _read_bytes_versioned(self, key: str) -> Versioned:
        """The bytes and the version of one consistent read; ``NotFound`` if none."""

    @abc.abstractmethod
    async def _replace_bytes_if(self, key: str, data: bytes, version: str) -> str | None:
        """One atomic compare-and-replace; the new version, or None if the key holds
        another version or none."""

    @abc.abstractmethod
    async def _delete_if(self, key: str, version: str) -> bool:
        """One atomic compare-and-delete; False only if the key holds another version."""
