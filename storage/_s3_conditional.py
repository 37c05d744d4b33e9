"""S3's conditional writes, for :class:`~storage.s3.S3Storage` (its methods call these
with itself): ``If-None-Match: *`` and ``If-Match: <ETag>`` on ``PutObject``,
``If-Match`` on ``DeleteObject``. A precondition that does not hold is 412 (or 404 for
``If-Match`` on a missing key) and changes nothing; a racing conditional request may be
409 ``ConditionalRequestConflict``, which the driver retries."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Versioned
from .errors import NotFound, PreconditionFailed

if TYPE_CHECKING:
    from .s3 import S3Storage

__all__ = ["delete_if", "put_if", "read_versioned"]


async def put_if(driver: S3Storage, key: str, data: bytes, **condition: str) -> str | None:
    """``PutObject`` under ``condition``; the new ETag, or None if it did not hold."""
    client = driver._client
    try:
        resp = await driver._call(
            key,
            "conditional write",
            lambda: client.put_object(
                Bucket=driver.bucket, Key=driver._full(key), Body=data, **condition
            ),
        )
    except (PreconditionFailed, NotFound):
        return None
    etag: str = resp["ETag"]
    return etag


async def read_versioned(driver: S3Storage, key: str) -> Versioned:
    client = driver._client

    async def get() -> Versioned:
        resp = await client.get_object(Bucket=driver.bucket, Key=driver._full(key))
        async with resp["Body"] as body:
            return Versioned(await body.read(), resp["ETag"])

    return await driver._call(key, "read", get)


async def delete_if(driver: S3Storage, key: str, version: str) -> bool:
    client = driver._client
    try:
        await driver._call(
            key,
            "conditional delete",
            lambda: client.delete_object(
                Bucket=driver.bucket, Key=driver._full(key), IfMatch=version
            ),
        )
    except PreconditionFailed:
        return False
    except NotFound:
        pass
    return True
