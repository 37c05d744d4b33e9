"""One measured upload+download in a fresh interpreter, for ``bench_storage``.

Run as ``python -m benchmarks._storage_child SPEC_JSON``; prints one JSON line. A fresh
process per system and shape keeps one run's heap (arenas, connection pools) out of
the next run's peak-memory figure, which is ``ru_maxrss`` minus the RSS measured after
imports and client set-up, just before the first byte moves.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import sys
import threading
import time
from typing import Any


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class PeakSampler:
    """Peak RSS while transferring. ``ru_maxrss`` alone may hold a start-up transient
    (botocore loading its service model) that predates the baseline, so it counts only
    if the transfer raises it; a sampler thread catches the rest."""

    def __init__(self) -> None:
        self.base = rss()
        self._before = peak_rss()
        self._peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            self._peak = max(self._peak, rss())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        after = peak_rss()
        return max(self._peak, after if after > self._before else 0)


def run_ours(spec: dict[str, Any]) -> dict[str, Any]:
    from storage import open_storage

    async def go() -> dict[str, Any]:
        uri = f"s3://{spec['bucket']}/{spec['prefix']}"
        async with open_storage(uri, endpoint_url=spec["endpoint"], **spec["options"]) as st:
            await st.exists("warm-up")  # connect before the baseline is taken
            sampler = PeakSampler()
            t0 = time.perf_counter()
            manifest = await st.put_checkpoint(spec["src"], "ckpt")
            t1 = time.perf_counter()
            await st.get_checkpoint("ckpt", spec["dst"])
            t2 = time.perf_counter()
            return {
                "upload_s": t1 - t0,
                "download_s": t2 - t1,
                "bytes": manifest.total_size,
                "files": len(manifest.files),
                "base_rss": sampler.base,
                "peak_rss": sampler.stop(),
                "budget_bytes": st.part_size * st.max_concurrency,
            }

    return asyncio.run(go())


def run_boto3(spec: dict[str, Any]) -> dict[str, Any]:
    import boto3
    from boto3.s3.transfer import TransferConfig

    s3 = boto3.client("s3", endpoint_url=spec["endpoint"])
    config = TransferConfig()  # the defaults, on purpose
    s3.list_objects_v2(Bucket=spec["bucket"], Prefix="warm-up", MaxKeys=1)
    files = []
    for root, _, names in os.walk(spec["src"]):
        for name in names:
            path = os.path.join(root, name)
            files.append((path, os.path.relpath(path, spec["src"])))
    files.sort()
    sampler = PeakSampler()
    t0 = time.perf_counter()
    for path, rel in files:
        s3.upload_file(path, spec["bucket"], f"{spec['prefix']}/{rel}", Config=config)
    t1 = time.perf_counter()
    for _, rel in files:
        target = os.path.join(spec["dst"], rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        s3.download_file(spec["bucket"], f"{spec['prefix']}/{rel}", target, Config=config)
    t2 = time.perf_counter()
    return {
        "upload_s": t1 - t0,
        "download_s": t2 - t1,
        "bytes": sum(os.path.getsize(p) for p, _ in files),
        "files": len(files),
        "base_rss": sampler.base,
        "peak_rss": sampler.stop(),
    }


def main() -> int:
    spec = json.loads(sys.argv[1])
    os.makedirs(spec["dst"], exist_ok=True)
    try:
        result = run_ours(spec) if spec["system"] == "trialflow" else run_boto3(spec)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        result["cpu_s"] = usage.ru_utime + usage.ru_stime
        result["peak_growth"] = result["peak_rss"] - result["base_rss"]
        # Same bytes back? (cheap check; the driver also verifies SHA-256 itself.)
        got = sum(
            os.path.getsize(os.path.join(r, n)) for r, _, ns in os.walk(spec["dst"]) for n in ns
        )
        result["round_trip_ok"] = got == result["bytes"]
    finally:
        shutil.rmtree(spec["dst"], ignore_errors=True)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
