"""Restores of content-addressed checkpoints reuse the S3 client's connections: a
chunked checkpoint is many GETs where a full copy is few, so a connection per request
(a response left unread, a pool that closes) would cost a handshake per chunk (and
TLS's on S3). Counted at a TCP proxy in front of an emulator that keeps connections
open, as S3 does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage import open_storage
from storage.blob_cache import CACHE_ENV
from storage.blobs import CHUNK_SIZE

from ..support.servers import BUCKET, FlakyProxy, unique_prefix
from .contract import read_tree


async def test_restores_reuse_the_pools_connections(
    moto_keepalive_url: str,
    proxy_to: list[FlakyProxy],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CACHE_ENV, "off")  # every chunk fetched
    proxy = FlakyProxy(target_port=int(moto_keepalive_url.rsplit(":", 1)[1]))
    await proxy.start()
    proxy_to.append(proxy)
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.bin").write_bytes(os.urandom(3 * CHUNK_SIZE + 7))
    (src / "state.json").write_bytes(b"{}")
    uri = f"s3://{BUCKET}/{unique_prefix()}"
    async with open_storage(uri, endpoint_url=proxy.url) as st:
        manifest = await st.put_checkpoint(src, "c")
        assert sum(len(f.chunks or ()) for f in manifest.files) == 5
        await st.get_checkpoint("c", tmp_path / "one")
        opened = proxy.accepted
        for name in ("two", "three"):
            await st.get_checkpoint("c", tmp_path / name)
            assert read_tree(tmp_path / name) == read_tree(src)
        assert proxy.accepted == opened  # 12 more GETs, no new connection
        assert st.blob_counts.fetched == 15
