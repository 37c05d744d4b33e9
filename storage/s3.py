"""S3 and S3-compatible stores through aiobotocore.

Large files go up as multipart uploads whose parts are read in order (hashed on the
way) and sent concurrently, each part holding its bytes from the storage-wide budget
until S3 acknowledges it; a failed or cancelled upload is aborted so no orphan parts
are billed. Downloads stream to a temporary file and resume from where they broke
off. botocore's own retries are off: :mod:`storage.retry` is the only retry loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import IO, Any, TypeVar

from aiobotocore.config import AioConfig
from botocore.exceptions import (
    ClientError,
)

from . import _s3_conditional
from ._concurrency import in_thread, map_bounded
from ._files import CHUNK, Digest, Sink
from ._s3_conditional import S3Object
from ._s3_errors import SDK_ERRORS, aws_answered, s3_error, unreachable
from ._s3_session import session
from .base import Storage, Versioned
from .errors import (
    BucketNotFound,
    NoCredentials,
    NotFound,
    PermissionDenied,
    StorageError,
    TransientError,
)
from .keys import join_key
from .manifest import ManifestEntry
from .retry import retrying

__all__ = ["S3Storage"]

T = TypeVar("T")

_MIN_PART = 5 * (1 << 20)
_MAX_PARTS = 10_000
#: The most one ``readinto`` copies into a pooled buffer: aiohttp joins what it holds
#: up to that size, so a small bound keeps each join small.
_PIECE = 256 << 10


class S3Storage(Storage):
    """``s3://bucket/prefix``. Credentials and region come from the standard AWS chain;
    the endpoint from ``endpoint_url`` or ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``.
    """

    scheme = "s3"
    content_addressed = True

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        **options: Any,
    ) -> None:
        prefix = prefix.strip("/")
        super().__init__(f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}", **options)
        self.bucket = bucket
        self.prefix = prefix
        # The first set of these is the endpoint; which one, for the error that says it
        # cannot be reached.
        sources = (
            ("endpoint_url", endpoint_url),
            ("AWS_ENDPOINT_URL_S3", os.environ.get("AWS_ENDPOINT_URL_S3")),
            ("AWS_ENDPOINT_URL", os.environ.get("AWS_ENDPOINT_URL")),
        )
        found = [(source, value) for source, value in sources if value]
        self._endpoint_source: str | None = found[0][0] if found else None
        self.endpoint_url: str | None = found[0][1] if found else None
        self.region = region
        self._stack: AsyncExitStack | None = None
        self._buffers: list[bytearray] = []
        self._client: Any = None

    # -- plumbing ---------------------------------------------------------------------

    def _full(self, key: str) -> str:
        return join_key(self.prefix, key)

    def _map_error(self, err: BaseException, key: str | None, what: str) -> StorageError:
        """The one place where SDK exceptions become ours (:func:`._s3_errors.s3_error`)."""
        return s3_error(err, key, what, uri=self.uri, bucket=self.bucket)

    async def _call(
        self, key: str | None, what: str, fn: Callable[[], Awaitable[T]], *, quiet: bool = False
    ) -> T:
        async def attempt() -> T:
            try:
                return await fn()
            except StorageError:
                raise
            except SDK_ERRORS as err:
                raise self._map_error(err, key, what) from err

        return await retrying(attempt, self.retry, what=what, quiet=quiet)

    # -- lifecycle --------------------------------------------------------------------

    async def _open(self) -> None:
        config = AioConfig(
            max_pool_connections=max(self.max_concurrency, self.file_concurrency) + 4,
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=10,
            read_timeout=120,
            # Our manifest carries SHA-256 of every file; per-request CRCs would only
            # cost CPU on the upload path.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            # Parts are streamed from recycled buffers; SigV4 payload hashing would read
            # every part once more on the event loop (HTTPS leaves payloads unsigned anyway).
            s3={"payload_signing_enabled": False},
        )
        if await session().get_credentials() is None:
            raise NoCredentials(
                "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                "or AWS_PROFILE with ~/.aws/credentials, or run with an instance role",
                uri=self.uri,
            )
        stack = AsyncExitStack()
        try:
            self._client = await stack.enter_async_context(
                session().create_client(
                    "s3", endpoint_url=self.endpoint_url, region_name=self.region, config=config
                )
            )
            try:
                await self._call(
                    None,
                    "checking the bucket",
                    lambda: self._client.head_bucket(Bucket=self.bucket),
                    quiet=True,
                )
            except NotFound as err:
                reason = f"bucket {self.bucket!r} does not exist (it is never created implicitly)"
                if self.endpoint_url is None:
                    reason = aws_answered(reason)
                raise BucketNotFound(reason, uri=self.uri) from err
            except PermissionDenied as err:
                if self.endpoint_url is not None or not isinstance(err.__cause__, ClientError):
                    raise
                raise PermissionDenied(aws_answered(err.reason), uri=self.uri) from err
            except TransientError as err:
                # The first request: a wrong or missing endpoint shows here, said once.
                said = unreachable(err, endpoint=self.endpoint_url, source=self._endpoint_source)
                if said is None:
                    raise
                raise said from None
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack

    async def _close(self) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.aclose()

    # -- bytes and keys ---------------------------------------------------------------

    async def _write_bytes(self, key: str, data: bytes) -> None:
        await self._call(
            key,
            "write",
            lambda: self._client.put_object(Bucket=self.bucket, Key=self._full(key), Body=data),
        )

    async def _read_bytes(self, key: str) -> bytes:
        async def get() -> bytes:
            resp = await self._client.get_object(Bucket=self.bucket, Key=self._full(key))
            async with resp["Body"] as body:
                data: bytes = await body.read()
                return data

        return await self._call(key, "read", get)

    @asynccontextmanager
    async def _read_pooled(self, key: str, size: int) -> AsyncIterator[memoryview]:
        """The object at ``key``, at most ``size + 1`` bytes of it (a longer one shows
        as such), in a view of a recycled part buffer, valid inside the ``with`` only:
        no allocation, and no join of the response's pieces, per chunk a restore
        fetches (see ``BlobIO.read_pooled``)."""
        buf = self._take_buffer(size + 1)
        try:
            limit = size + 1

            async def get() -> int:
                resp = await self._client.get_object(Bucket=self.bucket, Key=self._full(key))
                view = memoryview(buf)
                got = 0
                async with resp["Body"] as body:
                    if int(resp.get("ContentLength", 0)) > size:
                        return limit  # too long: no need to read it
                    while got < limit:
                        n = await body.readinto(view[got : min(limit, got + _PIECE)])
                        if not n:
                            break
                        got += n
                return got

            n = await self._call(key, "read", get)
            yield memoryview(buf)[:n]
        finally:
            self._give_buffer(buf)

    async def _exists(self, key: str) -> bool:
        try:
            await self._call(
                key,
                "stat",
                lambda: self._client.head_object(Bucket=self.bucket, Key=self._full(key)),
            )
        except NotFound:
            return False
        return True

    def _object(self, key: str) -> S3Object:
        """What :mod:`._s3_conditional` needs of this driver for one key."""
        return S3Object(self._client, self.bucket, key, self._full(key), self._call)

    async def _write_bytes_if_absent(self, key: str, data: bytes) -> str | None:
        return await _s3_conditional.put_if(self._object(key), data, IfNoneMatch="*")

    async def _replace_bytes_if(self, key: str, data: bytes, version: str) -> str | None:
        return await _s3_conditional.put_if(self._object(key), data, IfMatch=version)

    async def _read_bytes_versioned(self, key: str) -> Versioned:
        return await _s3_conditional.read_versioned(self._object(key))

    async def _delete_if(self, key: str, version: str) -> bool:
        return await _s3_conditional.delete_if(self._object(key), version)

    async def _list_raw(self, full_prefix: str, max_keys: int | None = None) -> list[str]:
        keys: list[str] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full_prefix}
            if token:
                kwargs["ContinuationToken"] = token
            if max_keys:
                kwargs["MaxKeys"] = max_keys
            page = await self._call(
                full_prefix, "list", _bind(self._client.list_objects_v2, kwargs)
            )
            keys.extend(obj["Key"] for obj in page.get("Contents", ()))
            token = page.get("NextContinuationToken")
            if max_keys or not page.get("IsTruncated") or not token:
                return keys

    async def _list(self, prefix: str) -> list[str]:
        full = self._full(prefix)
        cut = len(self.prefix) + 1 if self.prefix else 0
        if not full:
            found = await self._list_raw("")
        else:
            # Path-like semantics: "a" means the key "a" and keys under "a/", never "ab".
            below, exact = await asyncio.gather(
                self._list_raw(full + "/"), self._list_raw(full, max_keys=1)
            )
            found = below + [k for k in exact if k == full]
        return [k[cut:] for k in found if k[cut:]]

    async def _delete(self, prefix: str) -> None:
        keys = [self._full(k) for k in await self._list(prefix)]
        batches = [keys[i : i + 1000] for i in range(0, len(keys), 1000)]

        async def delete_batch(batch: list[str]) -> None:
            resp = await self._call(
                prefix,
                "delete",
                lambda: self._client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
                ),
            )
            errors = [e for e in resp.get("Errors", ()) if e.get("Code") != "NoSuchKey"]
            if errors:
                e = errors[0]
                raise self._map_error(
                    ClientError({"Error": e, "ResponseMetadata": {}}, "DeleteObjects"),
                    e.get("Key"),
                    f"delete ({len(errors)} keys failed)",
                )

        await map_bounded(delete_batch, batches, 4)

    # -- streaming files --------------------------------------------------------------

    async def _upload_file(self, path: str, key: str, size: int) -> Digest:
        if size < max(self.multipart_threshold, 1):
            async with self._budget.hold(size):
                data, digest = await asyncio.to_thread(_read_whole, path)
                await self._write_bytes(key, data)
            return digest
        return await self._multipart(path, key, size)

    async def _multipart(self, path: str, key: str, size: int) -> Digest:
        full = self._full(key)
        part_size = max(self.part_size, _MIN_PART, math.ceil(size / _MAX_PARTS))
        created = await self._call(
            key,
            "starting a multipart upload",
            lambda: self._client.create_multipart_upload(Bucket=self.bucket, Key=full),
        )
        upload_id: str = created["UploadId"]
        try:
            parts, digest = await self._send_parts(path, key, upload_id, part_size)
            await self._call(
                key,
                "completing a multipart upload",
                lambda: self._client.complete_multipart_upload(
                    Bucket=self.bucket,
                    Key=full,
                    UploadId=upload_id,
                    MultipartUpload={"Parts": parts},
                ),
            )
        except BaseException:
            await self._cleanup(self._abort(key, upload_id), f"aborting upload of {key!r}")
            raise
        return digest

    async def _send_parts(
        self, path: str, key: str, upload_id: str, part_size: int
    ) -> tuple[list[dict[str, Any]], Digest]:
        """Read parts in order (so one running SHA-256 covers the file) and send them
        concurrently; reading waits for budget, so memory stays bounded."""
        full = self._full(key)
        h = hashlib.sha256()
        total = 0
        tasks: list[asyncio.Task[dict[str, Any]]] = []

        async def send(number: int, buf: bytearray, size: int, grant: int) -> dict[str, Any]:
            view = memoryview(buf)[:size]
            try:
                resp = await self._call(
                    key,
                    f"uploading part {number}",
                    lambda: self._client.upload_part(
                        Bucket=self.bucket,
                        Key=full,
                        UploadId=upload_id,
                        PartNumber=number,
                        ContentLength=len(view),
                        Body=_Slices(view),
                    ),
                )
                return {"PartNumber": number, "ETag": resp["ETag"]}
            finally:
                view.release()
                self._give_buffer(buf)
                self._budget.release(grant)

        f = await asyncio.to_thread(open, path, "rb")
        try:
            number = 0
            while True:
                grant = await self._budget.acquire(part_size)
                buf = self._take_buffer(part_size)
                try:
                    n = await asyncio.to_thread(_read_part_into, f, buf, part_size, h)
                except BaseException:
                    self._give_buffer(buf)
                    self._budget.release(grant)
                    raise
                if n == 0 and number > 0:
                    self._give_buffer(buf)
                    self._budget.release(grant)
                    break
                number += 1
                total += n
                tasks.append(asyncio.ensure_future(send(number, buf, n, grant)))
                for t in tasks:  # fail fast: stop reading once any part has failed
                    if t.done() and not t.cancelled() and t.exception() is not None:
                        raise t.exception()  # type: ignore[misc]
                if n < part_size:
                    break
            parts = list(await asyncio.gather(*tasks))
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            await asyncio.to_thread(f.close)
        return parts, Digest(total, h.hexdigest())

    def _take_buffer(self, size: int) -> bytearray:
        """Part buffers are recycled: steady memory, and no allocator churn that would
        leave freed multi-MiB blocks resident in per-thread malloc arenas."""
        for i, buf in enumerate(self._buffers):
            if len(buf) >= size:
                return self._buffers.pop(i)
        return bytearray(size)

    def _give_buffer(self, buf: bytearray) -> None:
        if len(self._buffers) < self.max_concurrency:
            self._buffers.append(buf)

    async def _abort(self, key: str, upload_id: str) -> None:
        try:
            await self._call(
                key,
                "aborting a multipart upload",
                lambda: self._client.abort_multipart_upload(
                    Bucket=self.bucket, Key=self._full(key), UploadId=upload_id
                ),
            )
        except NotFound:
            pass

    async def _download_file(self, key: str, path: str, expected: ManifestEntry | None) -> None:
        full = self._full(key)
        if expected is not None and expected.size < self.multipart_threshold:
            # Small and of known size: one request, one thread hop to write it.
            async with self._budget.hold(expected.size):
                data = await self._read_bytes(key)
                await in_thread(self._write_verified, key, path, data, expected)
            return
        # Created inline (a quick open) so that a cancellation cannot orphan it.
        sink = Sink(path)
        etag: str | None = None

        async def attempt() -> None:
            nonlocal etag
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": full}
            if sink.size:
                # Resume after a broken connection, but only from the same object.
                kwargs["Range"] = f"bytes={sink.size}-"
                if etag:
                    kwargs["IfMatch"] = etag
            resp = await self._client.get_object(**kwargs)
            etag = resp.get("ETag")
            async with resp["Body"] as body:
                buf = bytearray()
                while chunk := await body.read(CHUNK):
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


def _read_whole(path: str) -> tuple[bytes, Digest]:
    with open(path, "rb") as f:
        data = f.read()
    return data, Digest(len(data), hashlib.sha256(data).hexdigest())


def _read_part_into(f: IO[bytes], buf: bytearray, n: int, h: Any) -> int:
    """Fill ``buf`` with up to ``n`` bytes (short only at end of file) and hash them."""
    view = memoryview(buf)
    got = 0
    try:
        while got < n:
            k = f.readinto(view[got:n])  # type: ignore[attr-defined]
            if not k:
                break
            got += k
        h.update(view[:got])
    finally:
        view.release()
    return got


class _Slices:
    """A part body that aiohttp sends slice by slice with back-pressure, so a part is
    never copied whole into the socket's buffer; each slice is a small copy so the
    transport never holds a view of a buffer that we recycle."""

    _STEP = 1 << 20  # few event-loop turns per part; at most this much sits in a socket buffer

    def __init__(self, view: memoryview) -> None:
        self._view = view
        self._pos = 0

    def __len__(self) -> int:
        return len(self._view)

    def read(self, n: int = -1) -> bytes:
        """botocore only accepts bytes or "file-like" bodies; this makes us the latter."""
        end = len(self._view) if n is None or n < 0 else min(len(self._view), self._pos + n)
        data = bytes(self._view[self._pos : end])
        self._pos = end
        return data

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._slices()

    async def _slices(self) -> AsyncIterator[bytes]:
        for i in range(0, len(self._view), self._STEP):
            yield bytes(self._view[i : i + self._STEP])


def _bind(fn: Callable[..., Awaitable[T]], kwargs: dict[str, Any]) -> Callable[[], Awaitable[T]]:
    """A zero-argument retryable call with ``kwargs`` frozen now (not at call time)."""
    frozen = dict(kwargs)
    return lambda: fn(**frozen)
