"""Async persistence for trials: local/NFS directories, S3 and GCS behind one contract.

``open_storage(uri)`` picks the driver from the URI; every driver offers the same
:class:`Storage` interface (bytes, listing, recursive delete, streamed directory
transfer, verified checkpoints committed by a manifest written last, and conditional
writes of small objects for locks and leases). Imports no Ray, and imports the S3/GCS
SDKs only when such a URI is opened.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from .base import Storage, Versioned
from .errors import (
    BucketNotFound,
    IntegrityError,
    InvalidKey,
    MissingDriver,
    NoCredentials,
    NotADirectory,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    StorageError,
    StorageFull,
    TransientError,
    UnsupportedFile,
    UnsupportedURI,
)
from .local import LocalStorage
from .manifest import MANIFEST_NAME, Manifest, ManifestEntry
from .noise import quiet_sdk_noise
from .retry import RetryPolicy
from .schemes import Scheme, driver_class, register_scheme, scheme_named, schemes

if TYPE_CHECKING:
    from .gcs import GCSStorage
    from .s3 import S3Storage

#: The built-in schemes (a driver is imported when a URI of its scheme is first opened).
for _scheme in (
    Scheme("file", "storage.local:LocalStorage", form="path"),
    Scheme(
        "s3",
        "storage.s3:S3Storage",
        extra="s3",
        endpoint_hint="storage_options={'endpoint_url': ...} or $AWS_ENDPOINT_URL",
    ),
    Scheme("gs", "storage.gcs:GCSStorage", extra="gcs", endpoint_hint="$STORAGE_EMULATOR_HOST"),
):
    register_scheme(_scheme)
del _scheme

__all__ = [
    "MANIFEST_NAME",
    "BucketNotFound",
    "GCSStorage",
    "IntegrityError",
    "InvalidKey",
    "LocalStorage",
    "Manifest",
    "ManifestEntry",
    "MissingDriver",
    "NoCredentials",
    "NotADirectory",
    "NotFound",
    "PermissionDenied",
    "PreconditionFailed",
    "RetryPolicy",
    "S3Storage",
    "Scheme",
    "Storage",
    "StorageError",
    "StorageFull",
    "TransientError",
    "UnsupportedFile",
    "UnsupportedURI",
    "Versioned",
    "open_storage",
    "quiet_sdk_noise",
    "register_scheme",
    "storage_uri",
]


def open_storage(uri: str | os.PathLike[str], **options: Any) -> Storage:
    """The driver for ``uri``, not yet connected (``async with`` or first use connects
    and checks that the bucket or root directory exists).

    - ``/abs/path``, ``rel/path`` or ``file:///abs/path``: :class:`LocalStorage`
      (options ``create``, ``fsync``);
    - ``s3://bucket/prefix``: :class:`S3Storage` (options ``endpoint_url``, ``region``;
      otherwise the standard AWS chain and ``AWS_ENDPOINT_URL``);
    - ``gs://bucket/prefix``: :class:`GCSStorage` (option ``service_file``; otherwise
      standard Google credentials; honours ``STORAGE_EMULATOR_HOST``);
    - any scheme added with :func:`register_scheme`.

    Common options: ``part_size``, ``max_concurrency``, ``file_concurrency``,
    ``multipart_threshold``, ``retry`` (a :class:`RetryPolicy`).
    """
    text = os.fspath(uri)
    if not isinstance(text, str) or not text:
        raise UnsupportedURI(f"storage URI must be a non-empty str, got {uri!r}")
    if "\x00" in text:
        raise UnsupportedURI("storage URI contains NUL")
    if "://" not in text:
        return driver_class(scheme_named("file", text), text)(text, **options)
    parts = urlsplit(text)
    scheme = scheme_named(parts.scheme.lower(), text)
    if scheme.form == "path":
        if parts.netloc not in ("", "localhost"):
            raise UnsupportedURI(
                f"{scheme.name} URI must be {scheme.name}:///absolute/path, got {text!r}"
            )
        return driver_class(scheme, text)(unquote(parts.path), **options)
    bucket, prefix = parts.netloc, parts.path.strip("/")
    if parts.query and bucket:  # pyarrow's s3://bucket?endpoint_override=... (Tune's)
        raise UnsupportedURI(
            f"{text!r}: a storage URI takes no query string ({parts.query!r}); give "
            f"{scheme.name}://{bucket}{'/' + prefix if prefix else ''} and another endpoint "
            f"in {scheme.endpoint_hint}"
        )
    if not bucket or parts.fragment:
        raise UnsupportedURI(f"expected {scheme.name}://bucket[/prefix], got {text!r}")
    driver: Callable[..., Storage] = driver_class(scheme, text)  # (bucket, prefix, ...)
    return driver(bucket, prefix, **options)


def storage_uri(storage: Storage, key: str) -> str:
    """The full URI of ``key`` in ``storage`` (same as ``storage.uri_for(key)``)."""
    return storage.uri_for(key)


def __getattr__(name: str) -> Any:
    # The SDK-backed drivers load on demand so that importing storage stays cheap.
    for scheme in schemes():
        if scheme.class_name == name:
            return driver_class(scheme)
    raise AttributeError(f"module 'storage' has no attribute {name!r}")
