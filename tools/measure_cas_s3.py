"""Run: PYTHONPATH=. python tools/measure_cas_s3.py (REPEATS=5 for five runs).

Save/restore latency and bytes stored on moto_server: full copies vs content-addressed.

A trial's model: a 48 MiB part that never changes and a 4 MiB part that changes at
every checkpoint; CHECKPOINTS saves in a row (each following the previous one, as the
persister is told), all kept; then restores of the newest. Interleaved repeats; medians.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20
CHECKPOINTS = 6
REPEATS = int(os.environ.get("REPEATS", "3"))
RESTORES = 3
BUCKET = "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bucket_bytes(s3, prefix: str) -> int:
    total = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/"):
        total += sum(o["Size"] for o in page.get("Contents", ()))
    return total


async def one_run(mode: str, url: str, work: Path, s3, rep: int) -> dict[str, object]:
    from storage import open_storage

    os.environ["TRIALFLOW_CHECKPOINT_DEDUP"] = "0" if mode == "full" else "1"
    prefix = f"{mode}-{rep}"
    frozen = os.urandom(48 * MiB)
    saves: list[float] = []
    restores: list[float] = []
    async with open_storage(f"s3://{BUCKET}/{prefix}", endpoint_url=url) as st:
        known: frozenset[str] = frozenset()
        for i in range(CHECKPOINTS):
            d = work / f"{prefix}-c{i}"
            d.mkdir()
            (d / "backbone.bin").write_bytes(frozen)
            (d / "head.bin").write_bytes(os.urandom(4 * MiB))
            t0 = time.perf_counter()
            manifest = await st.put_checkpoint(d, f"t/c{i}", known=known)
            saves.append(time.perf_counter() - t0)
            known = manifest.blobs()
            shutil.rmtree(d)
        for r in range(RESTORES):
            out = work / f"{prefix}-r{r}"
            t0 = time.perf_counter()
            await st.get_checkpoint(f"t/c{CHECKPOINTS - 1}", out)
            restores.append(time.perf_counter() - t0)
            shutil.rmtree(out)
    stored = bucket_bytes(s3, prefix)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/"):
        objs = [{"Key": o["Key"]} for o in page.get("Contents", ())]
        if objs:
            s3.delete_objects(Bucket=BUCKET, Delete={"Objects": objs})
    return {
        "first_save": saves[0],
        "later_saves": statistics.median(saves[1:]),
        "restore": statistics.median(restores),
        "bytes": stored,
    }


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """A moto_server of its own (the tests' launcher), ended on the way out."""
    port = free_port()
    launcher = ROOT / "tests" / "support" / "_moto_server.py"
    cmd = [sys.executable, str(launcher), "-H", "127.0.0.1", "-p", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def measure(url: str, s3: Any) -> None:
    rows: dict[str, list[dict[str, object]]] = {"full": [], "cas": []}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(REPEATS):
            for mode in ("full", "cas") if rep % 2 == 0 else ("cas", "full"):
                rows[mode].append(await one_run(mode, url, Path(tmp), s3, rep))
                print(mode, rep, rows[mode][-1], flush=True)
    med = {
        mode: {k: statistics.median(float(r[k]) for r in rs) for k in rs[0]}  # type: ignore[arg-type]
        for mode, rs in rows.items()
    }
    print(
        f"\n{CHECKPOINTS} checkpoints of 48 MiB frozen + 4 MiB changing, all kept; "
        f"median of {REPEATS} runs"
    )
    print(f"{'':14}{'full copies':>14}{'content-addr.':>14}{'ratio':>8}")
    for k, unit, scale in (
        ("first_save", "s", 1.0),
        ("later_saves", "s", 1.0),
        ("restore", "s", 1.0),
        ("bytes", "MiB", 1 / MiB),
    ):
        a, b = med["full"][k] * scale, med["cas"][k] * scale
        print(f"{k + ' (' + unit + ')':14}{a:14.3f}{b:14.3f}{b / a:8.2f}")


def main() -> None:
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1"
    )
    with moto_server() as url:
        s3 = boto3.client("s3", endpoint_url=url)
        s3.create_bucket(Bucket=BUCKET)
        asyncio.run(measure(url, s3))


if __name__ == "__main__":
    main()
