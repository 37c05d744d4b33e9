"""Pieces of storage/ that need no backend: URI dispatch, key validation, the manifest,
the byte budget, bounded mapping and redaction."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage import (
    IntegrityError,
    InvalidKey,
    LocalStorage,
    Manifest,
    ManifestEntry,
    UnsupportedURI,
    open_storage,
)
from storage._concurrency import ByteBudget, map_bounded
from storage.errors import NotFound, StorageError, redact
from storage.keys import validate_key, validate_prefix


@pytest.mark.parametrize(
    "uri", ["ftp://host/x", "s3://", "gs:///nobucket", "s3://b/p?x=1", "file://host/x", ""]
)
def test_bad_uris(uri: str) -> None:
    with pytest.raises(UnsupportedURI):
        open_storage(uri)


@pytest.mark.parametrize(
    ("uri", "remedy"),
    [
        ("s3://bucket/runs?endpoint_override=http://127.0.0.1:9000", "$AWS_ENDPOINT_URL"),
        ("gs://bucket?endpoint_override=http://127.0.0.1:9023", "$STORAGE_EMULATOR_HOST"),
    ],
)
def test_a_query_in_a_bucket_uri_says_where_the_endpoint_goes(uri: str, remedy: str) -> None:
    """Ray Tune's docs put a custom endpoint in the URI (pyarrow's ``endpoint_override``):
    refused at once, saying the URI without it and where the endpoint goes instead."""
    with pytest.raises(UnsupportedURI) as caught:
        open_storage(uri)
    message = str(caught.value)
    assert "takes no query string" in message and remedy in message
    assert uri.split("?")[0] in message


def test_uri_dispatch(tmp_path: object) -> None:
    assert isinstance(open_storage("/tmp/x"), LocalStorage)
    assert isinstance(open_storage("file:///tmp/x"), LocalStorage)
    s3 = open_storage("s3://bucket/a/b/", endpoint_url="http://127.0.0.1:1")
    assert s3.uri == "s3://bucket/a/b" and s3.uri_for("k/1") == "s3://bucket/a/b/k/1"
    gs = open_storage("gs://bucket")
    assert gs.uri_for("k") == "gs://bucket/k"


@given(st.text())
def test_valid_keys_never_escape(key: str) -> None:
    try:
        validate_key(key)
    except InvalidKey:
        return
    parts = key.split("/")
    assert key and not key.startswith("/") and "\x00" not in key
    assert all(p not in ("", ".", "..") for p in parts)


@pytest.mark.parametrize("key", ["a", "a/b", "a b/c.d", "ünï/кей", "..a/b..", "a/.hidden"])
def test_good_keys(key: str) -> None:
    assert validate_key(key) == key


def test_prefixes() -> None:
    assert validate_prefix("") == ""
    assert validate_prefix("a/b/") == "a/b"
    with pytest.raises(InvalidKey):
        validate_prefix("/")


def test_manifest_round_trip_and_rejections() -> None:
    m = Manifest(key="t/c", files=(ManifestEntry("a/b", 3, "0" * 64),), uri="s3://b/t/c")
    assert Manifest.from_dict(json.loads(json.dumps(m.to_dict()))) == m
    assert m.total_size == 3
    bad = m.to_dict()
    bad["files"][0]["size"] = -1
    with pytest.raises(IntegrityError):
        Manifest.from_dict(bad)
    with pytest.raises(IntegrityError):
        Manifest.from_dict({"format": "something-else"})
    with pytest.raises(IntegrityError):
        Manifest.from_json(b"\xff")


def test_errors_are_the_standard_kinds() -> None:
    err = NotFound("read failed", uri="s3://b/p", key="k")
    assert isinstance(err, FileNotFoundError) and isinstance(err, StorageError)
    assert str(err) == "read failed [s3://b/p/k]"
    assert "hunter2" not in redact("http://user:hunter2@host/x?X-Amz-Signature=hunter2")
    assert "hunter2" not in str(StorageError("token=hunter2 failed"))


async def test_byte_budget_is_fifo_and_cancel_safe() -> None:
    budget = ByteBudget(10)
    first = await budget.acquire(8)
    order: list[str] = []

    async def want(name: str, n: int) -> None:
        got = await budget.acquire(n)
        order.append(name)
        budget.release(got)

    big = asyncio.ensure_future(want("big", 10))
    await asyncio.sleep(0)
    small = asyncio.ensure_future(want("small", 1))  # fits, but must queue behind "big"
    cancelled = asyncio.ensure_future(want("cancelled", 5))
    await asyncio.sleep(0)
    assert order == []
    cancelled.cancel()
    budget.release(first)
    await asyncio.gather(big, small)
    assert order == ["big", "small"]
    assert budget.used == 0


async def test_map_bounded_bounds_and_cancels_on_error() -> None:
    running = peak = 0
    cancelled = 0

    async def work(i: int) -> int:
        nonlocal running, peak, cancelled
        running += 1
        peak = max(peak, running)
        try:
            await asyncio.sleep(0.01)
            if i == 5:
                raise ValueError("boom")
            await asyncio.sleep(1)
            return i
        except asyncio.CancelledError:
            cancelled += 1
            raise
        finally:
            running -= 1

    assert await map_bounded(lambda i: asyncio.sleep(0, i), range(5), 2) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="boom"):
        await map_bounded(work, range(20), 4)
    assert peak <= 4 and running == 0 and cancelled >= 1


def test_a_restored_file_is_a_clone_where_possible_and_a_verified_copy_elsewhere(
    tmp_path: Path,
) -> None:
    """On ext4 (this machine) cloning is refused once, then every file is copied; on a
    filesystem with reflinks it is cloned. Either way the digest is the source's."""
    import hashlib

    from storage import _files

    src = tmp_path / "src"
    src.write_bytes(os.urandom(300_000))
    digest = _files.clone_hashed(str(src), str(tmp_path / "dst"))
    assert (tmp_path / "dst").read_bytes() == src.read_bytes()
    assert digest.sha256 == hashlib.sha256(src.read_bytes()).hexdigest()
    assert digest.size == 300_000
    again = _files.clone_hashed(str(src), str(tmp_path / "dst2"))
    assert again == digest
