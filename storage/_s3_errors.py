"""S3's error codes and statuses, and what each becomes among storage's own errors."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
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

__all__ = ["SDK_ERRORS", "s3_error"]

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
