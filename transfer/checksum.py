"""The two checksums of a copy, each where it fits: content identity and the transit check.

* **Content identity** (``digest_file``, SHA-256): the delta rules skip a file whose
  target copy has the same digest, and a skipped file is never sent, so a collision,
  even one crafted on purpose, must be out of reach. It runs only on the few files that
  size and mtime cannot settle.
* **Transit check** (``new_check``, XXH3-128, as rsync uses since 3.2): the source
  hashes each file as it reads it, the sink hashes what arrived, and a difference fails
  the copy. It catches accidental corruption (a bug, bad memory or NIC, a file changed
  mid-read) and misses a random error with odds of 2^-128. A cryptographic hash would
  buy nothing more here: the check travels in the same stream as the bytes, so whoever
  could alter the bytes could alter the check too (the stream's token keeps strangers
  out). Measured on this kind of machine under load, SHA-256 hashed 0.7 GB/s on one
  core and XXH3-128 16 GB/s; with SHA-256 at both ends, hashing was half the CPU of a
  cross-node copy.

Both ends must agree on each, so they live here.
"""

from __future__ import annotations

import hashlib
import os
from typing import Protocol

import xxhash

__all__ = ["CHECK_SIZE", "Check", "digest_file", "new_check"]

#: Bytes of a transit check in a frame header.
CHECK_SIZE = 16
_READ = 8 * 1024 * 1024


class Check(Protocol):
    def update(self, data: memoryview, /) -> None: ...

    def digest(self) -> bytes: ...


def new_check() -> Check:
    """A fresh transit check (XXH3-128, ``CHECK_SIZE`` bytes)."""
    check: Check = xxhash.xxh3_128()
    return check


def digest_file(path: str) -> bytes:
    """SHA-256 of a file's bytes, read with one reusable buffer (bounded memory)."""
    hasher = hashlib.sha256()
    buf = bytearray(_READ)
    view = memoryview(buf)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        while True:
            n = os.readv(fd, [view])
            if n == 0:
                break
            hasher.update(view[:n])
    finally:
        os.close(fd)
    return hasher.digest()
