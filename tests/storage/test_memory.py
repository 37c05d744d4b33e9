"""The issue's memory bound, measured for real: upload a 256 MiB file to the S3
emulator in a fresh interpreter and compare its peak RSS (``ru_maxrss``) with its RSS
just before the upload. Growth must stay within part_size x max_concurrency + 50 MiB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..support.servers import BUCKET, unique_prefix

MiB = 1 << 20

CHILD = r"""
import asyncio, json, os, resource, sys, threading

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

def maxrss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

async def main(url, uri, path, part, conc):
    from storage import open_storage

    async with open_storage(uri, endpoint_url=url, part_size=part, max_concurrency=conc) as st:
        await st.exists("warm-up")
        # ru_maxrss may already hold a start-up transient (loading the S3 model), so
        # it only counts if the upload raises it; a sampler sees the rest.
        base, before, peak, stop = rss(), maxrss(), [0], threading.Event()

        def sample():
            while not stop.wait(0.002):
                peak[0] = max(peak[0], rss())

        t = threading.Thread(target=sample)
        t.start()
        try:
            m = await st.put_checkpoint(path, "ckpt")
        finally:
            stop.set()
            t.join()
    after = maxrss()
    top = max(peak[0], after if after > before else 0)
    print(json.dumps({"growth": top - base, "bytes": m.total_size}))

asyncio.run(main(*sys.argv[1:4], int(sys.argv[4]), int(sys.argv[5])))
"""


@pytest.mark.slow
def test_upload_of_256_mib_stays_within_bound(moto_url: str, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "big.bin", "wb") as f:
        for _ in range(16):
            f.write(os.urandom(16 * MiB))
    part, conc = 8 * MiB, 4
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            moto_url,
            f"s3://{BUCKET}/{unique_prefix()}",
            str(src),
            str(part),
            str(conc),
        ],
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["bytes"] == 256 * MiB
    assert result["growth"] <= part * conc + 50 * MiB, result
