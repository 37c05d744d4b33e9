"""One botocore session per event loop and credential environment."""

from __future__ import annotations

import asyncio
import os
import weakref
from typing import Any

from aiobotocore.session import get_session

__all__ = ["session"]

_SESSIONS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, tuple[tuple[str | None, ...], Any]
] = weakref.WeakKeyDictionary()

# Where botocore looks for credentials: a session resolves them once and keeps them, so
# a session made before one of these changed would answer with stale credentials (or
# with none) ever after.
_CREDENTIAL_SOURCES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_EC2_METADATA_DISABLED",
    "HOME",
)


def session() -> Any:
    """One botocore session per event loop and credential environment: its loader caches
    the S3 service model, which is slow to parse, so opening a storage (one per trial
    actor) stays cheap; per loop, because refreshable credentials hold asyncio locks;
    per credential environment, because a session keeps the credentials it resolved."""
    loop = asyncio.get_running_loop()
    sources = tuple(os.environ.get(name) for name in _CREDENTIAL_SOURCES)
    cached = _SESSIONS.get(loop)
    if cached is not None and cached[0] == sources:
        return cached[1]
    made = get_session()
    _SESSIONS[loop] = (sources, made)
    return made
