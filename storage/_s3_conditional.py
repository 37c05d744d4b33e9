"""S3's conditional writes, for :class:`~storage.s3.S3Storage`: ``If-None-Match: *`` and
``If-Match: <ETag>`` on ``PutObject``, ``If-Match`` on ``DeleteObject``. A precondition
that does not hold is 412 (or 404 for ``If-Match`` on a missing key) and changes
nothing; a racing conditional request may be 409 ``ConditionalRequestConflict``, which
the driver retries.

The driver hands each function an :class:`S3Object`: what these requests need of it,
named, so this module imports nothing of the driver's (no circle, no private names).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .base import Versioned
from .errors import NotFound, PreconditionFailed
from .retry import Call

__all__ = ["S3Object", "delete_if", "put_if", "read_versioned"]


@dataclass(frozen=True)
class S3Object:
    """One object of a bucket, as the driver hands it over."""

    client: Any  #: the driver's open aiobotocore S3 client
    bucket: str
    key: str  #: the caller's key, which errors name
    name: str  #: the object's full name in the bucket (the driver's prefix joined)
    call: Call


async def put_if(obj: S3Object, data: bytes, **condition: str) -> str | None:
    """``PutObject`` under ``condition``; the new ETag, or None if it did not hold."""
    try:
        resp = await obj.call(
            obj.key,
            "conditional write",
            lambda: obj.client.put_object(Bucket=obj.bucket, Key=obj.name, Body=data, **condition),
        )
    except (PreconditionFailed, NotFound):
        return None
    etag: str = resp["ETag"]
    return etag


async def read_versioned(obj: S3Object) -> Versioned:
    async def get() -> Versioned:
        resp = await obj.client.get_object(Bucket=obj.bucket, Key=obj.name)
        async with resp["Body"] as body:
            return Versioned(await body.read(), resp["ETag"])

    return await obj.call(obj.key, "read", get)


async def delete_if(obj: S3Object, version: str) -> bool:
    try:
        await obj.call(
            obj.key,
            "conditional delete",
            lambda: obj.client.delete_object(Bucket=obj.bucket, Key=obj.name, IfMatch=version),
        )
    except PreconditionFailed:
        return False
    except NotFound:
        pass
    return True
