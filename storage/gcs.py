"""Google Cloud Storage through gcloud-aio-storage.

gcloud-aio-storage supplies authentication (the standard Google credential chain),
emulator discovery (``STORAGE_EMULATOR_HOST``) and the JSON-API calls for small
objects, listing and deletion. Large files use a chunked resumable upload driven here,
because the library's resumable upload sends the file as one request and cannot resume
it: each chunk holds its bytes from the storage-wide budget, a broken chunk resumes
from the offset the server reports, and a failed or cancelled upload's session is
cancelled. Downloads stream to a temporary file and resume with a Range request.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from functools import partial
from typing import IO, Any, TypeVar
from urllib.parse import quote

import aiohttp
from gcloud.aio.storage import Storage as _GStorage
from gcloud.aio.storage.storage import init_api_root

from . import _gcs_conditional
from ._concurrency import in_thread, map_bounded
from ._files import CHUNK, Digest, Sink
from ._gcs_conditional import GCSObject
from ._gcs_errors import status_error
from .base import Storage, Versioned
from .errors import (
    BucketNotFound,
    NoCredentials,
    NotFound,
    StorageError,
    TransientError,
    full_device,
)
from .keys import join_key
from .manifest import ManifestEntry
from .retry import retrying

__all__ = ["GCSStorage"]

T = TypeVar("T")

_QUANTUM = 256 * 1024  # resumable chunks must be multiples of this
_SDK_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError)


def _credentials_found(service_file: str | None) -> bool:
    """Whether the Google credential chain can produce anything: a key file (given, in
    GOOGLE_APPLICATION_CREDENTIALS, or gcloud's application default), or a metadata
    server. Without this check a machine with none spends its retry budget (half a
    minute) on the metadata server's host name before saying "transient error"."""
    import os
    import socket

    from gcloud.aio.auth.token import get_service_data

    try:
        if get_service_data(service_file):
            return True
    except Exception:  # an explicit file that cannot be read: let the SDK say so
        return True
    if os.environ.get("GCE_METADATA_HOST") or os.environ.get("GCE_METADATA_ROOT"):
        return True
    try:
        socket.getaddrinfo("metadata.google.internal", 80)
    except OSError:
        return False
    return True


class GCSStorage(Storage):
    """``gs://bucket/prefix``. Credentials: ``service_file`` or the standard chain
    (``GOOGLE_APPLICATION_CREDENTIALS``, gcloud, metadata server); ``api_root`` or
    ``STORAGE_EMULATOR_HOST`` point it at another endpoint (then without auth)."""

    scheme = "gs"
    content_addressed = True

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        service_file: str | None = None,
        api_root: str | None = None,
        **options: Any,
    ) -> None:
        prefix = prefix.strip("/")
        super().__init__(f"gs://{bucket}/{prefix}" if prefix else f"gs://{bucket}", **options)
        self.bucket = bucket
        self.prefix = prefix
        self._service_file = service_file
        self._api_root_option = api_root
        self._session: aiohttp.ClientSession | None = None
        self._gcs: Any = None
        self._dev = False
        self._root = ""

    # -- plumbing ---------------------------------------------------------------------

    def _full(self, key: str) -> str:
        return join_key(self.prefix, key)

    def _object_url(self, full: str) -> str:
        return f"{self._root}/storage/v1/b/{quote(self.bucket, safe='')}/o/{quote(full, safe='')}"

    async def _auth(self) -> dict[str, str]:
        if self._dev:
            return {}
        token = await self._gcs.token.get()
        return {"Authorization": f"Bearer {token}"}

    def _status_error(self, status: int, text: str, key: str | None, what: str) -> StorageError:
        return status_error(status, text, key, what, uri=self.uri)

    def _map_error(self, err: BaseException, key: str | None, what: str) -> StorageError:
        """The one place where SDK exceptions become ours."""
        if isinstance(err, StorageError):
            return err
        if isinstance(err, aiohttp.ClientResponseError):
            return self._status_error(err.status, err.message, key, what)
        if isinstance(err, (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError)):
            return TransientError(
                f"{what} failed: {type(err).__name__}: {err}", uri=self.uri, key=key
            )
        full = full_device(err, what, uri=self.uri, key=key)
        if full is not None:  # writing a download on a full local disk
            return full
        return StorageError(f"{what} failed: {type(err).__name__}: {err}", uri=self.uri, key=key)

    async def _call(self, key: str | None, what: str, fn: Callable[[], Awaitable[T]]) -> T:
        async def attempt() -> T:
            try:
                return await fn()
            except StorageError:
                raise
            except _SDK_ERRORS as err:
                raise self._map_error(err, key, what) from err

        return await retrying(attempt, self.retry, what=what)

    # -- lifecycle --------------------------------------------------------------------

    async def _open(self) -> None:
        self._dev, self._root = init_api_root(self._api_root_option)
        self._root = self._root.rstrip("/")
        if not self._dev and not await asyncio.to_thread(_credentials_found, self._service_file):
            raise NoCredentials(
                "no Google credentials found: set GOOGLE_APPLICATION_CREDENTIALS to a service "
                "account key file, run `gcloud auth application-default login`, pass "
                "storage_options={'service_file': ...}, or run on Google Cloud (its metadata "
                "server provides them)",
                uri=self.uri,
            )
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=120),
            connector=aiohttp.TCPConnector(
                limit=max(self.max_concurrency, self.file_concurrency) + 4,
                ssl=not self._dev,
            ),
        )
        self._gcs = _GStorage(
            service_file=self._service_file,
            session=self._session,  # type: ignore[arg-type]
            api_root=self._root,
            api_is_dev=self._dev,
        )
        try:
            await self._call(
                None,
                "checking the bucket",
                lambda: self._gcs.get_bucket_metadata(self.bucket, timeout=30),
            )
        except NotFound as err:
            await self._close()
            raise BucketNotFound(
                f"bucket {self.bucket!r} does not exist (it is never created implicitly)",
                uri=self.uri,
            ) from err
        except BaseException:
            await self._close()
            raise

    async def _close(self) -> None:
        if self._gcs is not None:
            gcs, self._gcs = self._gcs, None
            await gcs.close()
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    # -- bytes and keys ---------------------------------------------------------------

    async def _write_bytes(self, key: str, data: bytes) -> None:
        if not data:
            # An empty resumable upload (Content-Range: bytes */0) is the one form of an
            # empty write that both GCS and the emulator accept.
            session_uri = await self._start_resumable(key)
            await self._put_chunk(session_uri, key, 0, b"", 0)
            return
        await self._call(
            key,
            "write",
            lambda: self._gcs.upload(
                self.bucket,
                self._full(key),
                data,
                content_type="application/octet-stream",
                force_resumable_upload=False,
                timeout=120,
            ),
        )

    async def _read_bytes(self, key: str) -> bytes:
        async def get() -> bytes:
            data: bytes = await self._gcs.download(self.bucket, self._full(key), timeout=120)
            return data

        return await self._call(key, "read", get)

    async def _exists(self, key: str) -> bool:
        try:
            await self._call(
                key, "stat", lambda: self._gcs.download_metadata(self.bucket, self._full(key))
            )
        except NotFound:
            return False
        return True

    def _object(self, key: str) -> GCSObject:
        """What :mod:`._gcs_conditional` needs of this driver for one key."""
        assert self._session is not None
        return GCSObject(
            session=self._session,
            uri=self.uri,
            key=key,
            name=self._full(key),
            url=self._object_url(self._full(key)),
            upload_url=f"{self._root}/upload/storage/v1/b/{quote(self.bucket, safe='')}/o",
            auth=self._auth,
            call=self._call,
            exists=partial(self._exists, key),
        )

    async def _write_bytes_if_absent(self, key: str, data: bytes) -> str | None:
        return await _gcs_conditional.upload_if(self._object(key), data, "0")  # 0: no live object

    async def _replace_bytes_if(self, key: str, data: bytes, version: str) -> str | None:
        return await _gcs_conditional.upload_if(self._object(key), data, version)

    async def _read_bytes_versioned(self, key: str) -> Versioned:
        return await _gcs_conditional.read_versioned(self._object(key))

    async def _delete_if(self, key: str, version: str) -> bool:
        return await _gcs_conditional.delete_if(self._object(key), version)

    async def _list_raw(self, full_prefix: str) -> list[str]:
        names: list[str] = []
        token: str | None = None
        while True:
            params = {"prefix": full_prefix, "fields": "items(name),nextPageToken"}
            if token:
                params["pageToken"] = token
            page = await self._call(
                full_prefix or None,
                "list",
                lambda p=params: self._gcs.list_objects(self.bucket, params=p, timeout=60),  # type: ignore[misc]
            )
            names.extend(item["name"] for item in page.get("items", ()))
            token = page.get("nextPageToken")
            if not token:
                return names

    async def _list(self, prefix: str) -> list[str]:
        full = self._full(prefix)
        cut = len(self.prefix) + 1 if self.prefix else 0
        if not full:
            found = await self._list_raw("")
        else:
            below = await self._list_raw(full + "/")
            found = below + ([full] if prefix and await self._exists(prefix) else [])
        return [k[cut:] for k in found if k[cut:]]

    async def _delete(self, prefix: str) -> None:
        keys = await self._list(prefix)

        async def delete_one(key: str) -> None:
            try:
                await self._call(
                    key, "delete", lambda: self._gcs.delete(self.bucket, self._full(key))
                )
            except NotFound:
                pass

        await map_bounded(delete_one, keys, self.file_concurrency)

    # -- streaming files --------------------------------------------------------------

    async def _upload_file(self, path: str, key: str, size: int) -> Digest:
        if size < max(self.multipart_threshold, 1):
            async with self._budget.hold(size):
                data = await asyncio.to_thread(_read_whole, path)
                await self._write_bytes(key, data)
            return Digest(len(data), hashlib.sha256(data).hexdigest())
        return await self._resumable(path, key, size)

    async def _start_resumable(self, key: str) -> str:
        assert self._session is not None
        session = self._session
        full = self._full(key)

        async def start() -> str:
            url = f"{self._root}/upload/storage/v1/b/{quote(self.bucket, safe='')}/o"
            headers = {
                **(await self._auth()),
                "Content-Type": "application/json; charset=UTF-8",
                "X-Upload-Content-Type": "application/octet-stream",
            }
            async with session.post(
                url,
                params={"uploadType": "resumable", "name": full},
                data=json.dumps({"name": full}),
                headers=headers,
            ) as resp:
                if resp.status >= 300:
                    raise self._status_error(resp.status, await resp.text(), key, "upload")
                return resp.headers["Location"]

        return await self._call(key, "starting a resumable upload", start)

    async def _resumable(self, path: str, key: str, size: int) -> Digest:
        chunk_size = max(_QUANTUM, self.part_size // _QUANTUM * _QUANTUM)

        session_uri = await self._start_resumable(key)
        h = hashlib.sha256()
        offset = 0
        try:
            f = await asyncio.to_thread(open, path, "rb")
            try:
                while True:
                    async with self._budget.hold(chunk_size):
                        data = await asyncio.to_thread(_read_part, f, chunk_size, h)
                        last = len(data) < chunk_size or offset + len(data) >= size
                        total = offset + len(data) if last else None
                        await self._put_chunk(session_uri, key, offset, data, total)
                    offset += len(data)
                    if last:
                        break
            finally:
                await asyncio.to_thread(f.close)
        except BaseException:
            await self._cleanup(self._cancel_upload(session_uri), f"cancelling upload of {key!r}")
            raise
        return Digest(offset, h.hexdigest())

    async def _put_chunk(
        self, session_uri: str, key: str, offset: int, data: bytes, total: int | None
    ) -> None:
        """Send ``data`` (at ``offset``); after a failure ask the server how much it kept
        and send only the rest."""
        assert self._session is not None
        session = self._session
        end = offset + len(data)
        pos = offset
        total_s = "*" if total is None else str(total)

        async def attempt() -> None:
            nonlocal pos
            body = memoryview(data)[pos - offset :]
            if len(body):
                content_range = f"bytes {pos}-{end - 1}/{total_s}"
            else:
                content_range = f"bytes */{total_s}"
            headers = {**(await self._auth()), "Content-Range": content_range}
            async with session.put(
                session_uri, data=bytes(body), headers=headers, allow_redirects=False
            ) as resp:
                await resp.read()
                if resp.status == 308 and total is None:
                    pos = end
                    return
                if resp.status in (200, 201) and total is not None:
                    pos = end
                    return
                if resp.status in (400, 416):
                    # Offsets out of sync (e.g. the HTTP client replayed the chunk after a
                    # broken connection the server had partly read): resync and resend.
                    raise TransientError(
                        f"resumable upload out of sync (HTTP {resp.status})",
                        uri=self.uri,
                        key=key,
                    )
                raise self._status_error(
                    resp.status, await resp.text(), key, "uploading a resumable chunk"
                )

        async def resync() -> None:
            nonlocal pos
            try:
                headers = {**(await self._auth()), "Content-Range": f"bytes */{total_s}"}
                async with session.put(session_uri, headers=headers, allow_redirects=False) as resp:
                    await resp.read()
                    if resp.status == 308:
                        got = resp.headers.get("Range", "")
                        kept = int(got.rsplit("-", 1)[1]) + 1 if "-" in got else 0
                        pos = min(max(kept, offset), end)
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
                pass

        async def guarded() -> None:
            try:
                await attempt()
            except StorageError:
                raise
            except _SDK_ERRORS as err:
                raise self._map_error(err, key, "uploading a resumable chunk") from err

        await retrying(guarded, self.retry, what="resumable chunk", on_retry=resync)

    async def _cancel_upload(self, session_uri: str) -> None:
        """Best effort: GCS answers 499 to a cancelled session; emulators may not
        support it, and an abandoned session expires on its own after a week."""
        if self._session is None:
            return
        try:
            async with self._session.delete(session_uri, headers=await self._auth()) as resp:
                await resp.read()
        except (aiohttp.ClientError, asyncio.TimeoutError):
            pass

    async def _download_file(self, key: str, path: str, expected: ManifestEntry | None) -> None:
        if expected is not None and expected.size < self.multipart_threshold:
            # Small and of known size: one request, one thread hop to write it.
            async with self._budget.hold(expected.size):
                data = await self._read_bytes(key)
                await in_thread(self._write_verified, key, path, data, expected)
            return
        assert self._session is not None
        session = self._session
        url = self._object_url(self._full(key))
        # Created inline (a quick open) so that a cancellation cannot orphan it.
        sink = Sink(path)
        generation: str | None = None

        async def attempt() -> None:
            nonlocal generation
            params = {"alt": "media"}
            headers = await self._auth()
            if sink.size:
                headers["Range"] = f"bytes={sink.size}-"
                if generation:
                    params["ifGenerationMatch"] = generation
            async with session.get(url, params=params, headers=headers) as resp:
                if resp.status not in (200, 206):
                    raise self._status_error(resp.status, await resp.text(), key, "download")
                if sink.size and resp.status != 206:
                    raise TransientError("server ignored the resume range", uri=self.uri, key=key)
                generation = resp.headers.get("x-goog-generation", generation)
                buf = bytearray()
                async for chunk in resp.content.iter_chunked(CHUNK):
                    buf += chunk
                    if len(buf) >= CHUNK:
                        await in_thread(sink.write, buf)
                        buf = bytearray()
                if buf:
                    await in_thread(sink.write, buf)

        try:
            await self._call(key, "download", attempt)
            self._verify(key, sink.digest(), expected)
            await in_thread(sink.commit)
        except BaseException:
            await asyncio.shield(in_thread(sink.discard))
            raise


def _read_whole(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _read_part(f: IO[bytes], n: int, h: Any) -> bytes:
    data = f.read(n)
    h.update(data)
    return data
