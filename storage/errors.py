"""The storage error family.

Callers handle storage failures without importing botocore or aiohttp: every driver
converts SDK exceptions into these types at one boundary (``_map_error`` in each
driver), chaining the original as ``__cause__``. Messages name the URI and the key and
never carry credentials (see :func:`redact`).
"""

from __future__ import annotations

import errno
import re

__all__ = [
    "BucketNotFound",
    "IntegrityError",
    "InvalidKey",
    "NotADirectory",
    "NotFound",
    "PermissionDenied",
    "PreconditionFailed",
    "StorageError",
    "StorageFull",
    "TransientError",
    "UnsupportedFile",
    "UnsupportedURI",
    "full_device",
    "redact",
]

# Anything that looks like a secret in text that came from an SDK or a URL.
_SECRET_PATTERNS = [
    (re.compile(r"(://)[^/@\s]+@"), r"\1***@"),
    (
        re.compile(
            r"(?i)(x-amz-(?:signature|credential|security-token)|signature|access_token"
            r"|token|aws_secret_access_key|secret)([=:]\s*)[^&\s,'\"]+"
        ),
        r"\1\2***",
    ),
    (re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)[^'\"\n]+"), r"\1***"),
]


def redact(text: str) -> str:
    """Blank out credentials that may hide in SDK messages or URLs before we show them."""
    for pattern, repl in _SECRET_PATTERNS:
        text = pattern.sub(repl, text)
    return text


class StorageError(Exception):
    """Base of every error a storage driver raises.

    ``uri`` is the storage location (``s3://bucket/prefix``), ``key`` the key involved,
    if any; both are part of the message so a log line alone says where it failed.
    """

    def __init__(self, message: str, *, uri: str = "", key: str | None = None) -> None:
        self.uri = uri
        self.key = key
        self.reason = redact(message)
        where = uri if key is None else f"{uri.rstrip('/')}/{key}" if uri else key
        full = f"{message} [{where}]" if where else message
        super().__init__(redact(full))

    @property
    def message(self) -> str:
        return str(self)


class NotFound(StorageError, FileNotFoundError):
    """The key (or checkpoint) does not exist; also a ``FileNotFoundError``."""

    def __init__(self, message: str, *, uri: str = "", key: str | None = None) -> None:
        StorageError.__init__(self, message, uri=uri, key=key)

    def __str__(self) -> str:
        # OSError.__str__ would print errno/strerror; keep our message.
        return str(self.args[0]) if self.args else ""


class BucketNotFound(StorageError):
    """The bucket (or the local root directory) does not exist; we never create it.

    Deliberately not a ``NotFound``: a missing bucket is a configuration error, and code
    that treats ``NotFound`` as "no such key, carry on" must not swallow it.
    """


class PermissionDenied(StorageError, PermissionError):
    """The credentials in use may not do this; also a ``PermissionError``."""

    def __init__(self, message: str, *, uri: str = "", key: str | None = None) -> None:
        StorageError.__init__(self, message, uri=uri, key=key)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class IntegrityError(StorageError):
    """Stored bytes do not match their manifest (size or checksum), or a manifest is
    malformed: the checkpoint must not be used."""


class InvalidKey(StorageError, ValueError):
    """A key is absolute, contains ``..``, ``.``, an empty component, NUL, or a reserved
    name; rejected before any I/O."""


class UnsupportedURI(StorageError, ValueError):
    """The URI's scheme has no driver, or the URI is malformed."""


class PreconditionFailed(StorageError):
    """A conditional write or delete found the key holding another version (or none):
    nothing was changed. The conditional methods of :class:`~storage.Storage` answer it
    as ``None`` / ``False``; drivers raise it from one attempt."""


class TransientError(StorageError):
    """A failure worth retrying (5xx, throttling, reset connection, timeout).

    Drivers raise it from single attempts; :mod:`storage.retry` retries it and, once the
    attempts are spent, lets the last one propagate.
    """


class NoCredentials(PermissionDenied):
    """No credentials for the cloud storage could be found at all: waiting will not
    change that, so it is said at once, with how to provide them."""


class MissingDriver(UnsupportedURI):
    """The packages of the driver a URI needs are not installed (an optional extra)."""


class StorageFull(StorageError):
    """The device or quota that holds the bytes is full (``ENOSPC``, ``EDQUOT``), or a
    file is over a size limit (``EFBIG``). Waiting will not free space, so it is said at
    once and never retried; what was stored before is left as it was, and a half-written
    checkpoint is removed."""


class UnsupportedFile(StorageError):
    """A directory to store holds what storage cannot keep: a FIFO, a socket, a device,
    a symbolic link to a directory, or a link that points out of the directory (it is
    never followed there). Refused before anything is written; a retry would meet it
    again."""


class NotADirectory(StorageError, NotADirectoryError):
    """A local storage root (or one of its parents) is a regular file, where a directory
    must be; also a ``NotADirectoryError``."""

    def __init__(self, message: str, *, uri: str = "", key: str | None = None) -> None:
        StorageError.__init__(self, message, uri=uri, key=key)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


#: ``errno`` values meaning "no room here": a full disk, a spent quota, a file over the
#: filesystem's (or the process's ``RLIMIT_FSIZE``) size limit.
_FULL = {errno.ENOSPC: "no space left on the device", errno.EFBIG: "a file is too large"}
if hasattr(errno, "EDQUOT"):
    _FULL[errno.EDQUOT] = "the disk quota is exceeded"


def full_device(err: BaseException, what: str, *, uri: str, key: str | None) -> StorageFull | None:
    """``err`` as a :class:`StorageFull` when it is an ``OSError`` saying the device or
    quota is full; None otherwise. Shared by the drivers: any of them writes local files
    (the local driver its staging, S3 and GCS their downloads)."""
    if not isinstance(err, OSError) or err.errno not in _FULL:
        return None
    where = f" ({err.filename})" if err.filename else ""
    return StorageFull(
        f"{what} failed: {_FULL[err.errno]}{where}; free space there (or raise the quota) "
        "and try again (what was stored before is unchanged)",
        uri=uri,
        key=key,
    )
