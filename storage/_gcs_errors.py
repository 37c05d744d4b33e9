"""GCS's HTTP answers as our errors: one mapping for the driver and its conditional
writes (:mod:`._gcs_conditional`), which build requests of their own."""

from __future__ import annotations

import json
from typing import Any

from .errors import (
    BucketNotFound,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    StorageError,
    TransientError,
)

__all__ = ["status_error"]


def status_error(status: int, text: str, key: str | None, what: str, *, uri: str) -> StorageError:
    """The error for an HTTP ``status`` with body ``text`` while doing ``what`` on
    ``key``: 404 is a missing object (or bucket, when GCS says so), 412 a precondition
    that did not hold, 408/429/5xx transient (retried), the rest final."""
    kw: dict[str, Any] = {"uri": uri, "key": key}
    detail = text
    try:
        detail = json.loads(text)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        pass
    reason = f"{what} failed: HTTP {status} {str(detail)[:200]}".rstrip()
    if status == 404:
        if "bucket" in str(detail).lower() and "not" in str(detail).lower():
            return BucketNotFound(reason, **kw)
        return NotFound(reason, **kw)
    if status in (401, 403):
        return PermissionDenied(reason, **kw)
    if status == 412:
        return PreconditionFailed(reason, **kw)
    if status in (408, 429) or status >= 500:
        return TransientError(reason, **kw)
    return StorageError(reason, **kw)
