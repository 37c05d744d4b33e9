"""Keys: ``/``-separated paths relative to a storage's root prefix.

One validator for every driver, so a key that is rejected on S3 is rejected on a local
disk too, before any I/O. A valid key can never escape its root: it has no leading
``/``, no drive, no ``..``/``.``/empty component and no NUL, so joining it to a root
path or prefix is safe without further checks.
"""

from __future__ import annotations

import os
import re

from .errors import InvalidKey

__all__ = [
    "BLOBS_PREFIX",
    "RESERVED_PREFIX",
    "join_key",
    "local_path",
    "relative_key",
    "validate_key",
    "validate_prefix",
]

#: Temporary names the drivers create (staging directories, partial files). Keys may
#: not use them, so listing can hide them without hiding anything of the caller's.
RESERVED_PREFIX = ".trialflow-tmp-"

#: The content-addressed blobs of checkpoints live under this first part of a storage
#: key (``.blobs/sha256/ab/<hex>``): no key a caller passes to a storage may start
#: with it (keys *inside* a checkpoint may).
BLOBS_PREFIX = ".blobs"

_DRIVE = re.compile(r"^[A-Za-z]:")


def validate_key(key: str, *, uri: str = "", root: bool = False) -> str:
    """Return ``key`` unchanged if it is a valid, non-empty key; raise ``InvalidKey``.
    ``root``: the key is relative to a storage's root, where :data:`BLOBS_PREFIX` is
    reserved."""
    if not isinstance(key, str):
        raise InvalidKey(f"key must be a str, not {type(key).__name__}", uri=uri)
    if key == "":
        raise InvalidKey("key must not be empty", uri=uri)
    _check(key, uri, root)
    return key


def validate_prefix(prefix: str, *, uri: str = "", root: bool = False) -> str:
    """Like :func:`validate_key` but ``""`` (everything) is allowed and one trailing
    ``/`` is dropped, since prefixes name directories."""
    if not isinstance(prefix, str):
        raise InvalidKey(f"prefix must be a str, not {type(prefix).__name__}", uri=uri)
    if prefix.endswith("/") and prefix != "/":
        prefix = prefix[:-1]
    if prefix == "":
        return ""
    _check(prefix, uri, root)
    return prefix


def _check(key: str, uri: str, root: bool = False) -> None:
    shown = repr(key)
    if root and key.split("/", 1)[0] == BLOBS_PREFIX:
        raise InvalidKey(
            f"key {shown} starts with {BLOBS_PREFIX!r}, reserved for checkpoint blobs", uri=uri
        )
    if "\x00" in key:
        raise InvalidKey(f"key {shown} contains NUL", uri=uri)
    if key.startswith("/") or _DRIVE.match(key) or key.startswith("\\"):
        raise InvalidKey(f"key {shown} is absolute; keys are relative to the root", uri=uri)
    for part in key.split("/"):
        if part in ("", ".", ".."):
            raise InvalidKey(
                f"key {shown} has a {part or 'empty'!r} component; use plain a/b/c keys",
                uri=uri,
            )
        if part.startswith(RESERVED_PREFIX):
            raise InvalidKey(f"key {shown} uses the reserved name {RESERVED_PREFIX}*", uri=uri)
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidKey(f"key {shown} is not valid UTF-8", uri=uri) from err


def join_key(*parts: str) -> str:
    """Join already-valid keys/prefixes, skipping empty ones."""
    return "/".join(p for p in parts if p)


def relative_key(path: str, base: str, *, uri: str = "") -> str:
    """The key of local file ``path`` inside local directory ``base``."""
    rel = os.path.relpath(path, base)
    if os.sep != "/":
        rel = rel.replace(os.sep, "/")
    return validate_key(rel, uri=uri)


def local_path(base: str, key: str) -> str:
    """The file a (relative, valid) key names under the local directory ``base``."""
    return os.path.join(base, *key.split("/"))
