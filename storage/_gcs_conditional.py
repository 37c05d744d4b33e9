"""GCS's conditional writes, for :class:`~storage.gcs.GCSStorage`: generation
preconditions of the JSON API.

- A write is one multipart upload (metadata and bytes in one request, which also takes
  empty bytes) with ``ifGenerationMatch``: ``0`` means no live object has the name, a
  generation means that one is live; otherwise GCS answers 412 and writes nothing.
- A versioned read fetches the object's generation, then the bytes of exactly that
  generation (``generation=``): a bucket without versioning keeps no replaced
  generation, so a replacement in between is a 404, and the read starts again.
- A conditional delete is a delete with ``ifGenerationMatch``.

The driver hands each function a :class:`GCSObject`: what these requests need of it,
named, so this module imports nothing of the driver's (no circle, no private names).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp

from ._gcs_errors import status_error
from .base import Versioned
from .errors import NotFound, PreconditionFailed, TransientError
from .retry import Call

__all__ = ["GCSObject", "delete_if", "read_versioned", "upload_if"]

#: Reads of an object replaced while being read, before giving up.
READ_AGAIN = 5


@dataclass(frozen=True)
class GCSObject:
    """One object of a bucket, as the driver hands it over."""

    session: aiohttp.ClientSession  #: the driver's open session
    uri: str  #: the storage's URI, which errors name
    key: str  #: the caller's key, which errors name
    name: str  #: the object's full name in the bucket (the driver's prefix joined)
    url: str  #: the object's JSON API URL
    upload_url: str  #: the bucket's upload endpoint
    auth: Callable[[], Awaitable[dict[str, str]]]  #: headers that authorize a request
    call: Call
    exists: Callable[[], Awaitable[bool]]  #: whether a live object has the name


async def upload_if(obj: GCSObject, data: bytes, generation: str) -> str | None:
    """Write ``data`` if the live generation is ``generation``; the new generation."""
    boundary = f"trialflow-{hashlib.sha256(data).hexdigest()[:24]}"
    body = b"".join(
        [
            f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".encode(),
            json.dumps({"name": obj.name}).encode(),
            f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n".encode(),
            data,
            f"\r\n--{boundary}--\r\n".encode(),
        ]
    )

    async def attempt() -> str:
        params = {"uploadType": "multipart", "ifGenerationMatch": generation}
        headers = {
            **(await obj.auth()),
            "Content-Type": f"multipart/related; boundary={boundary}",
        }
        async with obj.session.post(
            obj.upload_url, params=params, data=body, headers=headers
        ) as resp:
            text = await resp.text()
            if resp.status >= 300:
                raise status_error(resp.status, text, obj.key, "conditional write", uri=obj.uri)
            return str(json.loads(text)["generation"])

    try:
        return await obj.call(obj.key, "conditional write", attempt)
    except (PreconditionFailed, NotFound):
        return None


async def read_versioned(obj: GCSObject) -> Versioned:
    async def attempt() -> Versioned | None:
        headers = await obj.auth()
        params = {"fields": "generation"}
        async with obj.session.get(obj.url, params=params, headers=headers) as meta:
            text = await meta.text()
            if meta.status != 200:
                raise status_error(meta.status, text, obj.key, "read", uri=obj.uri)
            generation = str(json.loads(text)["generation"])
        params = {"alt": "media", "generation": generation}
        async with obj.session.get(obj.url, params=params, headers=headers) as resp:
            if resp.status == 404:
                return None  # replaced since: read again
            if resp.status != 200:
                raise status_error(resp.status, await resp.text(), obj.key, "read", uri=obj.uri)
            return Versioned(await resp.read(), generation)

    for _ in range(READ_AGAIN):
        got = await obj.call(obj.key, "read", attempt)
        if got is not None:
            return got
    raise TransientError(
        f"read failed: the object changed {READ_AGAIN} times while being read",
        uri=obj.uri,
        key=obj.key,
    )


async def delete_if(obj: GCSObject, version: str) -> bool:
    async def attempt() -> None:
        headers = await obj.auth()
        params = {"ifGenerationMatch": version}
        async with obj.session.delete(obj.url, params=params, headers=headers) as resp:
            if resp.status >= 300:
                text = await resp.text()
                raise status_error(resp.status, text, obj.key, "conditional delete", uri=obj.uri)

    try:
        await obj.call(obj.key, "conditional delete", attempt)
    except PreconditionFailed:  # another generation, or none: 412 says not which
        return not await obj.exists()
    except NotFound:
        pass
    return True
