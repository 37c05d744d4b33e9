"""The dashboard on S3 (moto) and GCS (the emulator): experiments listed from keys, a
journal written by the real writer read and followed live, a damaged one named."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from orchestrator.core.journal_format import JOURNAL_KEY
from orchestrator.views.dashboard import running
from storage import Storage, open_storage

from ..support.dashboard_events import LIVE_TIMEOUT_S, next_event
from ..support.servers import BUCKET, GCS_OPTIONS, aws_env, gcs_url, moto_url, unique_prefix  # noqa: F401
from .journals import Run


@pytest.fixture(params=["s3", "gs"])
def remote_root(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    if request.param == "s3":
        options = {"endpoint_url": request.getfixturevalue("moto_url")}
    else:
        options = {"api_root": request.getfixturevalue("gcs_url"), **GCS_OPTIONS}
    return f"{request.param}://{BUCKET}/{unique_prefix()}", options


async def test_a_remote_experiment_is_served_and_followed(
    remote_root: tuple[str, dict[str, Any]],
) -> None:
    root, options = remote_root
    writer_store = open_storage(f"{root}/exp", **options)
    broken_store = open_storage(f"{root}/broken", **options)
    reader_store: Storage = open_storage(root, **options)
    try:
        run = Run(writer_store, ["t1", "t2"])  # type: ignore[arg-type]
        run.report("t1", loss=1.0)
        run.report("t2", loss=2.0)
        await run.write()
        await broken_store.write_bytes(JOURNAL_KEY, b'{"format": 2, "trials": [')
        async with running(reader_store, port=0) as served, aiohttp.ClientSession() as http:
            base = f"http://127.0.0.1:{served.port}/api/experiments"
            async with http.get(base) as response:
                listed = {e["name"]: e for e in (await response.json())["experiments"]}
            assert set(listed) == {"exp", "broken"}
            assert "truncated" in listed["broken"]["problem"]
            async with http.get(f"{base}/exp?metric=loss") as response:
                first = await response.json()
            assert first["series"]["t1"]["y"] == [1.0] and first["summary"]["problem"] is None
            stream_url = f"{base}/exp/stream?metric=loss&since={first['since']}"
            async with http.get(stream_url) as stream:
                run.report("t1", loss=0.5)
                await run.write()
                event = await asyncio.wait_for(next_event(stream, "delta"), LIVE_TIMEOUT_S)
            assert event["series"]["t1"] == {"from": 1, "x": [2], "y": [0.5]}
    finally:
        for store in (writer_store, broken_store, reader_store):
            await store.aclose()
