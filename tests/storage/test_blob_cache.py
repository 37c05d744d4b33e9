"""The node's copies of checkpoint chunks (:mod:`storage.blob_cache`): checked on every
use, bounded, shared safely, and off when asked or when the disk refuses."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from storage.blob_cache import CACHE_ENV, BlobCache, node_cache


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_copy_is_returned_only_when_its_bytes_hash_to_its_name(tmp_path: Path) -> None:
    cache = BlobCache(str(tmp_path))
    data = os.urandom(1000)
    assert cache.get(sha(data), len(data)) is None
    cache.put(sha(data), data)
    assert cache.get(sha(data), len(data)) == data
    assert cache.get(sha(data), len(data) - 1) is None  # the size the manifest names
    path = Path(cache.path(sha(data)))
    path.write_bytes(b"X" + data[1:])  # damaged on disk
    assert cache.get(sha(data), len(data)) is None
    assert not path.exists()  # removed, to be kept again by the next fetch
    cache.put(sha(data), memoryview(data))
    assert cache.get(sha(data), len(data)) == data
    # The user's alone, as the checkpoints are.
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700


def test_the_least_recently_used_copies_go_past_the_bound(tmp_path: Path) -> None:
    cache = BlobCache(str(tmp_path), max_bytes=10_000)
    chunks = [os.urandom(3000) for _ in range(3)]
    for i, data in enumerate(chunks):
        cache.put(sha(data), data)
        os.utime(cache.path(sha(data)), (1000 + i, 1000 + i))  # oldest first
    assert cache.get(sha(chunks[0]), 3000) == chunks[0]  # used: now the newest
    cache.put(sha(b"x" * 3000), b"x" * 3000)  # 12,000 bytes: over the bound
    left = {p.name for p in tmp_path.rglob("*") if p.is_file()}
    assert sha(chunks[1]) not in left  # the least recently used went first
    assert {sha(chunks[0]), sha(b"x" * 3000)} <= left
    assert sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file()) <= 8_000


def test_a_copy_held_open_survives_its_eviction(tmp_path: Path) -> None:
    """Another process may evict a copy a restore is reading: the reader keeps it."""
    cache = BlobCache(str(tmp_path))
    data = os.urandom(5000)
    cache.put(sha(data), data)
    with open(cache.path(sha(data)), "rb") as fh:
        BlobCache(str(tmp_path), max_bytes=1).evict()
        assert fh.read() == data
    assert cache.get(sha(data), len(data)) is None


def test_where_it_lives_and_how_to_turn_it_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "here"))
    here = node_cache()
    assert here is not None and here.root == str(tmp_path / "here")
    for off in ("0", "off", "false", "no"):
        monkeypatch.setenv(CACHE_ENV, off)
        assert node_cache() is None
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    default = node_cache()
    assert default is not None
    assert default.root == str(tmp_path / "xdg" / "trialflow" / "blobs")


def test_a_directory_that_refuses_writes_turns_it_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the directory would be")
    monkeypatch.setenv(CACHE_ENV, str(blocked / "blobs"))
    cache = node_cache()
    assert cache is not None
    cache.put(sha(b"data"), b"data")  # refused: no copy, no error
    assert cache.get(sha(b"data"), 4) is None
    assert node_cache() is None  # off for this process from now on
