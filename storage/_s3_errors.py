"""S3's error codes and statuses, and what each becomes among storage's own errors."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import aiohttp
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    CredentialRetrievalError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)

from .errors import (
    BucketNotFound,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    StorageError,
    TransientError,
    full_device,
)

__all__ = ["SDK_ERRORS", "aws_answered", "s3_error", "unreachable", "unreachable_message"]

_NOT_FOUND = {"NoSuchKey", "404", "NotFound", "NoSuchUpload"}
_DENIED = {
    "AccessDenied",
    "403",
    "Forbidden",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "AllAccessDisabled",
    "AccountProblem",
}
_TRANSIENT = {
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "RequestTimeout",
    "RequestTimeoutException",
    "InternalError",
    "ServiceUnavailable",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
}
#: What the SDK and its HTTP layer raise; anything else is a bug, not a storage error.
SDK_ERRORS = (BotoCoreError, ClientError, aiohttp.ClientError, asyncio.TimeoutError, OSError)


def s3_error(
    err: BaseException, key: str | None, what: str, *, uri: str, bucket: str
) -> StorageError:
    """An SDK exception as ours: the S3 driver's one conversion (its ``_map_error``)."""
    if isinstance(err, StorageError):
        return err
    kw: dict[str, Any] = {"uri": uri, "key": key}
    if isinstance(err, ClientError):
        info = err.response.get("Error", {})
        code = str(info.get("Code", ""))
        status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        reason = f"{what} failed: {code or status} {info.get('Message', '')}".rstrip()
        if code == "NoSuchBucket":
            return BucketNotFound(f"{what} failed: bucket {bucket!r} does not exist", **kw)
        if code == "PreconditionFailed" or status == 412:
            return PreconditionFailed(reason, **kw)
        if code == "ConditionalRequestConflict":  # a racing conditional write: retry
            return TransientError(reason, **kw)
        if code == "NotImplemented" or status == 501:
            return StorageError(
                f"{reason} (this S3-compatible store lacks a feature trialflow needs, "
                "such as conditional writes: If-None-Match / If-Match)",
                **kw,
            )
        if code in _NOT_FOUND or status == 404:
            return NotFound(reason, **kw)
        if code in _DENIED or status in (401, 403):
            return PermissionDenied(reason, **kw)
        if code in _TRANSIENT or status >= 500 or status == 429:
            return TransientError(reason, **kw)
        return StorageError(reason, **kw)
    if isinstance(err, (NoCredentialsError, PartialCredentialsError, CredentialRetrievalError)):
        return PermissionDenied(f"{what} failed: no usable AWS credentials", **kw)
    if isinstance(
        err,
        (HTTPClientError, BotoConnectionError, aiohttp.ClientError, asyncio.TimeoutError),
    ) or isinstance(err, ConnectionError):
        return TransientError(f"{what} failed: {type(err).__name__}: {err}", **kw)
    full = full_device(err, what, uri=uri, key=key)
    if full is not None:  # writing a download on a full local disk
        return full
    return StorageError(f"{what} failed: {type(err).__name__}: {err}", **kw)


def unreachable(
    err: TransientError, *, endpoint: str | None, source: str | None
) -> TransientError | None:
    """``err`` (the bucket check's last failure) as one error saying which endpoint could
    not be reached and how to set it, when no connection to the endpoint could be made
    at all; None when it failed some other way. Raised ``from None``: its message holds
    all the chain would tell (a user's first S3 mistake is one line, not a page)."""
    connect = next((e for e in _chain(err) if isinstance(e, BotoConnectionError)), None)
    if connect is None:
        return None
    tried = str(getattr(connect, "kwargs", {}).get("endpoint_url") or endpoint or "")
    return TransientError(unreachable_message(endpoint, source, tried, _why(connect)), uri=err.uri)


_HOW = "the storage option endpoint_url or the environment variable AWS_ENDPOINT_URL"


def unreachable_message(endpoint: str | None, source: str | None, tried: str, why: str) -> str:
    """What :func:`unreachable` says: the endpoint tried (and where it came from) or that
    none is set, why it failed, and what to do."""
    if endpoint:
        return (
            f"cannot reach the S3 endpoint {endpoint} (from {source or 'endpoint_url'}): {why}; "
            f"check the address and that the store is up (it is set by {_HOW})"
        )
    return (
        f"cannot reach S3: no endpoint is set, so AWS's {tried or 'endpoint'} was tried "
        f"({why}); for an S3-compatible store (MinIO, moto...) set its address with {_HOW}"
    )


def aws_answered(reason: str) -> str:
    """``reason`` (the bucket check's refusal or "no such bucket") when no endpoint is
    set: AWS answered, where the user may have meant another store."""
    return (
        f"{reason}; no endpoint is set, so this is AWS's answer: for an S3-compatible "
        f"store (MinIO, moto...) set its address with {_HOW}"
    )


def _chain(err: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        yield cause
        cause = cause.__cause__ or cause.__context__


def _why(connect: BaseException) -> str:
    """Why a connection failed, in words: the deepest OS error's, else the SDK's."""
    deepest = [e for e in _chain(connect) if isinstance(e, OSError) and e is not connect]
    wrapped = getattr(connect, "kwargs", {}).get("error")
    if isinstance(wrapped, BaseException):
        deepest += [e for e in _chain(wrapped) if isinstance(e, OSError)]
    for cause in reversed(deepest):
        if isinstance(cause, socket.gaierror):
            return f"its host name does not resolve ({cause.strerror})"
        if isinstance(cause, ssl.SSLError):
            return f"TLS failed ({cause.reason or cause}; an http:// store named as https://?)"
        if isinstance(cause, TimeoutError):
            return "connecting timed out"
        if cause.errno:
            return os.strerror(cause.errno).lower()
    if isinstance(connect, ConnectTimeoutError):
        return "connecting timed out"
    return str(connect)
