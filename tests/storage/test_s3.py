"""The contract on S3 (moto_server), checked through boto3, plus S3 specifics:
multipart really used, no orphan uploads, missing bucket, endpoint from the
environment, credentials never shown."""

from __future__ import annotations

import traceback
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from storage import BucketNotFound, NotFound, RetryPolicy, S3Storage, Storage, open_storage
from storage.blobs import DEDUP_ENV

from ..support.servers import BUCKET, FAKE_SECRET, FlakyProxy, boto3_client, unique_prefix
from .blobs_contract import BlobsContract
from .contract import MiB, NetworkContract, Reopen, StorageContract, make_tree, read_tree

OPTIONS: dict[str, Any] = {"part_size": 5 * MiB, "max_concurrency": 4}


class S3Raw:
    def __init__(self, url: str, prefix: str) -> None:
        self.s3 = boto3_client(url)
        self.prefix = prefix

    def read(self, key: str) -> bytes:
        body: bytes = self.s3.get_object(Bucket=BUCKET, Key=f"{self.prefix}/{key}")["Body"].read()
        return body

    def write(self, key: str, data: bytes) -> None:
        self.s3.put_object(Bucket=BUCKET, Key=f"{self.prefix}/{key}", Body=data)

    def list(self) -> list[str]:
        keys: list[str] = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=BUCKET, Prefix=f"{self.prefix}/"
        ):
            keys += [o["Key"][len(self.prefix) + 1 :] for o in page.get("Contents", ())]
        return sorted(keys)

    def orphans(self) -> list[str]:
        resp = self.s3.list_multipart_uploads(Bucket=BUCKET, Prefix=f"{self.prefix}/")
        return [u["Key"] for u in resp.get("Uploads", ())]


@pytest.fixture
def prefix() -> str:
    return unique_prefix()


class TestS3(StorageContract, NetworkContract, BlobsContract):
    scheme = "s3"
    big_size = 12 * MiB + 123

    @pytest.fixture
    async def store(self, moto_url: str, prefix: str) -> AsyncIterator[Storage]:
        async with open_storage(f"s3://{BUCKET}/{prefix}", endpoint_url=moto_url, **OPTIONS) as st:
            yield st

    @pytest.fixture
    def raw(self, moto_url: str, prefix: str) -> S3Raw:
        return S3Raw(moto_url, prefix)

    @pytest.fixture
    async def reopen(self, moto_url: str, prefix: str) -> AsyncIterator[Reopen]:
        opened: list[Storage] = []

        async def make(**options: Any) -> Storage:
            st = open_storage(
                f"s3://{BUCKET}/{prefix}", endpoint_url=moto_url, **{**OPTIONS, **options}
            )
            await st.open()
            opened.append(st)
            return st

        yield make
        for st in opened:
            await st.aclose()

    @pytest.fixture
    async def flaky(self, moto_url: str, prefix: str) -> AsyncIterator[Any]:
        made: list[tuple[Storage, FlakyProxy]] = []
        port = int(moto_url.rsplit(":", 1)[1])

        async def make(**options: Any) -> tuple[Storage, FlakyProxy]:
            proxy = FlakyProxy(port)
            await proxy.start()
            opts = {**OPTIONS, "retry": RetryPolicy(attempts=6, base_delay=0.01, max_delay=0.05)}
            st = open_storage(
                f"s3://{BUCKET}/{prefix}", endpoint_url=proxy.url, **{**opts, **options}
            )
            await st.open()
            made.append((st, proxy))
            return st, proxy

        yield make
        for st, proxy in made:
            proxy.reset()
            await st.aclose()
            await proxy.stop()


async def test_multipart_is_used(
    moto_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DEDUP_ENV, "0")  # full copies: a content-addressed chunk is one PUT
    prefix = unique_prefix()
    make_tree(tmp_path / "src", 11 * MiB)
    async with open_storage(f"s3://{BUCKET}/{prefix}", endpoint_url=moto_url, **OPTIONS) as st:
        await st.put_checkpoint(tmp_path / "src", "c")
    head = boto3_client(moto_url).head_object(Bucket=BUCKET, Key=f"{prefix}/c/big.bin")
    assert head["ETag"].strip('"').endswith("-3")  # 5 + 5 + 1 MiB


async def test_missing_bucket(moto_url: str) -> None:
    st = open_storage("s3://no-such-bucket/p", endpoint_url=moto_url)
    with pytest.raises(BucketNotFound) as info:
        await st.open()
    assert "no-such-bucket" in str(info.value)
    assert not isinstance(info.value, NotFound)
    assert "no-such-bucket" not in [
        b["Name"] for b in boto3_client(moto_url).list_buckets()["Buckets"]
    ]


async def test_endpoint_from_environment(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    async with open_storage(f"s3://{BUCKET}/{unique_prefix()}") as st:
        assert isinstance(st, S3Storage)
        assert st.uri_for("a/b").startswith(f"s3://{BUCKET}/t-") and st.uri_for("a/b").endswith(
            "/a/b"
        )
        await st.write_bytes("k", b"v")
        assert await st.read_bytes("k") == b"v"


async def test_errors_do_not_leak_credentials(
    moto_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_storage(f"s3://{BUCKET}/{unique_prefix()}", endpoint_url=moto_url) as st:
        with pytest.raises(NotFound) as info:
            await st.read_bytes("missing")
    text = "".join(traceback.format_exception(info.value)) + caplog.text
    assert FAKE_SECRET not in text
    assert "botocore" not in type(info.value).__module__


async def test_a_checkpoint_is_read_from_a_storage_opened_above_its_own(
    moto_url: str, tmp_path: Path
) -> None:
    """Its blobs are under the root of the storage that wrote it (the experiment's), which
    the manifest's key tells a reader that opened the bucket higher up."""
    prefix = unique_prefix()
    files = make_tree(tmp_path / "src", 3 * MiB)
    async with open_storage(f"s3://{BUCKET}/{prefix}/exp", endpoint_url=moto_url) as st:
        manifest = await st.put_checkpoint(tmp_path / "src", "trial/c1")
    assert manifest.version == 2
    async with open_storage(f"s3://{BUCKET}/{prefix}", endpoint_url=moto_url) as above:
        await above.get_checkpoint("exp/trial/c1", tmp_path / "dst")
    assert read_tree(tmp_path / "dst") == files
