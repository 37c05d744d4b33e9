"""GCS's conditional writes, for :class:`~storage.gcs.GCSStorage` (its methods call
these with itself): generation preconditions of the JSON API.

- A write is one multipart upload (metadata and bytes in one request, which also takes
  empty bytes) with ``ifGenerationMatch``: ``0`` means no live object has the name, a
  generation means that one is live; otherwise GCS answers 412 and writes nothing.
- A versioned read fetches the object's generation, then the bytes of exactly that
  generation (``generation=``): a bucket without versioning keeps no replaced
  generation, so a replacement in between is a 404, and the read starts again.
- A conditional delete is a delete with ``ifGenerationMatch``.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING
from urllib.parse import quote

from .base import Versioned
from .errors import NotFound, PreconditionFailed, TransientError

if TYPE_CHECKING:
    from .gcs import GCSStorage

__all__ = ["delete_if", "read_versioned", "upload_if"]

#: Reads of an object replaced while being read, before giving up.
READ_AGAIN = 5


async def upload_if(driver: GCSStorage, key: str, data: bytes, generation: str) -> str | None:
    """Write ``data`` if the live generation is ``generation``; the new generation."""
    assert driver._session is not None
    session = driver._session
    boundary = f"trialflow-{hashlib.sha256(data).hexdigest()[:24]}"
    body = b"".join(
        [
            f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".encode(),
            json.dumps({"name": driver._full(key)}).encode(),
            f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n".encode(),
            data,
            f"\r\n--{boundary}--\r\n".encode(),
        ]
    )

    async def attempt() -> str:
        url = f"{driver._root}/upload/storage/v1/b/{quote(driver.bucket, safe='')}/o"
        params = {"uploadType": "multipart", "ifGenerationMatch": generation}
        headers = {
            **(await driver._auth()),
            "Content-Type": f"multipart/related; boundary={boundary}",
        }
        async with session.post(url, params=params, data=body, headers=headers) as resp:
            text = await resp.text()
            if resp.status >= 300:
                raise driver._status_error(resp.status, text, key, "conditional write")
            return str(json.loads(text)["generation"])

    try:
        return await driver._call(key, "conditional write", attempt)
    except (PreconditionFailed, NotFound):
        return None


async def read_versioned(driver: GCSStorage, key: str) -> Versioned:
    assert driver._session is not None
    session = driver._session
    url = driver._object_url(driver._full(key))

    async def attempt() -> Versioned | None:
        headers = await driver._auth()
        async with session.get(url, params={"fields": "generation"}, headers=headers) as meta:
            text = await meta.text()
            if meta.status != 200:
                raise driver._status_error(meta.status, text, key, "read")
            generation = str(json.loads(text)["generation"])
        params = {"alt": "media", "generation": generation}
        async with session.get(url, params=params, headers=headers) as resp:
            if resp.status == 404:
                return None  # replaced since: read again
            if resp.status != 200:
                raise driver._status_error(resp.status, await resp.text(), key, "read")
            return Versioned(await resp.read(), generation)

    for _ in range(READ_AGAIN):
        got = await driver._call(key, "read", attempt)
        if got is not None:
            return got
    raise TransientError(
        f"read failed: the object changed {READ_AGAIN} times while being read",
        uri=driver.uri,
        key=key,
    )


async def delete_if(driver: GCSStorage, key: str, version: str) -> bool:
    assert driver._session is not None
    session = driver._session
    url = driver._object_url(driver._full(key))

    async def attempt() -> None:
        headers = await driver._auth()
        params = {"ifGenerationMatch": version}
        async with session.delete(url, params=params, headers=headers) as resp:
            if resp.status >= 300:
                raise driver._status_error(
                    resp.status, await resp.text(), key, "conditional delete"
                )

    try:
        await driver._call(key, "conditional delete", attempt)
    except PreconditionFailed:  # another generation, or none: 412 says not which
        return not await driver._exists(key)
    except NotFound:
        pass
    return True
