"""The contract on GCS (gcp-storage-emulator), checked through plain HTTP against the
emulator, plus GCS specifics: STORAGE_EMULATOR_HOST and a missing bucket."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import pytest
import requests

from storage import BucketNotFound, GCSStorage, RetryPolicy, Storage, open_storage

from ..support.servers import BUCKET, GCS_OPTIONS, FlakyProxy, unique_prefix
from .blobs_contract import BlobsContract
from .contract import NetworkContract, Reopen, StorageContract

KiB = 1 << 10
OPTIONS = GCS_OPTIONS


class GCSRaw:
    def __init__(self, url: str, prefix: str) -> None:
        self.url = url
        self.prefix = prefix

    def _name(self, key: str) -> str:
        return f"{self.prefix}/{key}"

    def read(self, key: str) -> bytes:
        r = requests.get(
            f"{self.url}/storage/v1/b/{BUCKET}/o/{quote(self._name(key), safe='')}",
            params={"alt": "media"},
            timeout=30,
        )
        r.raise_for_status()
        return r.content

    def write(self, key: str, data: bytes) -> None:
        r = requests.post(
            f"{self.url}/upload/storage/v1/b/{BUCKET}/o",
            params={"uploadType": "media", "name": self._name(key)},
            data=data,
            timeout=30,
        )
        r.raise_for_status()

    def list(self) -> list[str]:
        names: list[str] = []
        token = None
        while True:
            params = {"prefix": f"{self.prefix}/"}
            if token:
                params["pageToken"] = token
            r = requests.get(f"{self.url}/storage/v1/b/{BUCKET}/o", params=params, timeout=30)
            r.raise_for_status()
            page = r.json()
            names += [i["name"][len(self.prefix) + 1 :] for i in page.get("items", ())]
            token = page.get("nextPageToken")
            if not token:
                return sorted(names)

    def orphans(self) -> list[str]:
        return []  # the emulator does not expose resumable sessions


@pytest.fixture
def prefix() -> str:
    return unique_prefix()


class TestGCS(StorageContract, NetworkContract, BlobsContract):
    scheme = "gs"
    big_size = 1024 * KiB + 4321
    cut_at = 100 * KiB

    @pytest.fixture
    async def store(self, gcs_url: str, prefix: str) -> AsyncIterator[Storage]:
        async with open_storage(f"gs://{BUCKET}/{prefix}", api_root=gcs_url, **OPTIONS) as st:
            yield st

    @pytest.fixture
    def raw(self, gcs_url: str, prefix: str) -> GCSRaw:
        return GCSRaw(gcs_url, prefix)

    @pytest.fixture
    async def reopen(self, gcs_url: str, prefix: str) -> AsyncIterator[Reopen]:
        opened: list[Storage] = []

        async def make(**options: Any) -> Storage:
            st = open_storage(f"gs://{BUCKET}/{prefix}", api_root=gcs_url, **{**OPTIONS, **options})
            await st.open()
            opened.append(st)
            return st

        yield make
        for st in opened:
            await st.aclose()

    @pytest.fixture
    async def flaky(self, gcs_url: str, prefix: str) -> AsyncIterator[Any]:
        made: list[tuple[Storage, FlakyProxy]] = []
        port = int(gcs_url.rsplit(":", 1)[1])

        async def make(**options: Any) -> tuple[Storage, FlakyProxy]:
            proxy = FlakyProxy(port)
            await proxy.start()
            opts = {**OPTIONS, "retry": RetryPolicy(attempts=6, base_delay=0.01, max_delay=0.05)}
            st = open_storage(f"gs://{BUCKET}/{prefix}", api_root=proxy.url, **{**opts, **options})
            await st.open()
            made.append((st, proxy))
            return st, proxy

        yield make
        for st, proxy in made:
            proxy.reset()
            await st.aclose()
            await proxy.stop()


async def test_emulator_host_from_environment(
    gcs_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_url)
    prefix = unique_prefix()
    async with open_storage(f"gs://{BUCKET}/{prefix}") as st:
        assert isinstance(st, GCSStorage)
        await st.write_bytes("k", b"v")
    assert GCSRaw(gcs_url, prefix).read("k") == b"v"


async def test_missing_bucket(gcs_url: str) -> None:
    st = open_storage("gs://no-such-bucket/p", api_root=gcs_url)
    with pytest.raises(BucketNotFound) as info:
        await st.open()
    assert "gs://no-such-bucket/p" in str(info.value)


def test_the_emulator_serves_on_while_a_client_stalls_mid_request(gcs_url: str) -> None:
    """The fixture's emulator answers one request at a time; a request whose body
    stops halfway (an upload cancelled mid-part) must not hold every later one."""
    host, port = gcs_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as stalled:
        stalled.sendall(
            f"POST /upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=x HTTP/1.1\r\n"
            f"Host: {host}\r\nContent-Length: 1000\r\n\r\n0123456789".encode()
        )
        time.sleep(0.2)  # the emulator is now reading the rest of that body
        # Answered while that client still stalls: an emulator held by it would answer
        # only once the connection closes, after this ``with``, and the get time out.
        reply = requests.get(f"{gcs_url}/storage/v1/b/{BUCKET}/o", timeout=120)
        assert reply.status_code == 200
