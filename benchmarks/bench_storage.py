"""S3 driver against boto3's managed transfer, on the S3 emulator (moto_server).

Two shapes, each uploaded then downloaded: one large file (1 GiB by default) and many
files (1,000 x 1 MiB). Systems:

* ``trialflow``: ``storage`` S3 driver, ``put_checkpoint`` then ``get_checkpoint``
  (default options: 8 MiB parts, 8 in flight, 16 files at once), which also computes
  and verifies SHA-256 of every file;
* ``boto3``: ``upload_file``/``download_file`` with the default ``TransferConfig``
  (8 MiB parts, 10 threads), a plain loop over files for the many-files shape.

Each (system, shape) runs in its own fresh process (``_storage_child``) against the
same moto_server, started here on a free loopback port. Reported: MB/s up and down,
the peak RSS growth of the transferring process, and trialflow/boto3 speed ratios.
The issue's targets: ratio >= 1.0 on both shapes, and trialflow's peak growth <=
part_size x concurrency + 50 MiB.

Usage::

    python -m benchmarks.bench_storage                  # 1 GiB, 1000 x 1 MiB
    python -m benchmarks.bench_storage --large 256M --files 200

Figures go to stdout and to ``benchmarks/out/storage.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

MiB = 1 << 20
REPO = Path(__file__).resolve().parent.parent
BUCKET = "bench-storage"


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B").rstrip("I")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_moto(log: Path) -> tuple[subprocess.Popen[bytes], str]:
    import requests

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    exe = Path(sys.executable).parent / "moto_server"
    proc = subprocess.Popen(
        [str(exe), "-H", "127.0.0.1", "-p", str(port)],
        stdout=open(log, "wb"),  # noqa: SIM115 - the child owns it
        stderr=subprocess.STDOUT,
    )
    for _ in range(300):
        try:
            requests.get(url, timeout=1)
            return proc, url
        except requests.RequestException:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("moto_server did not start")


def write_random(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 64 * MiB)
            f.write(os.urandom(n))
            left -= n


def run_child(spec: dict[str, Any]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks._storage_child", json.dumps(spec)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"child failed:\n{out.stdout}\n{out.stderr}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def empty_prefix(url: str, prefix: str) -> None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=url)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", ())]
        if keys:
            s3.delete_objects(Bucket=BUCKET, Delete={"Objects": keys, "Quiet": True})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--large", default="1G", help="size of the one large file")
    parser.add_argument("--files", type=int, default=1000, help="number of small files")
    parser.add_argument("--file-size", default="1M", help="size of each small file")
    parser.add_argument("--systems", default="trialflow,boto3")
    parser.add_argument("--shapes", default="large,many")
    args = parser.parse_args(sys.argv[1:])

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    systems = args.systems.split(",")
    shapes = args.shapes.split(",")
    work = Path(tempfile.mkdtemp(prefix="bench-storage-"))
    proc, url = start_moto(work / "moto.log")
    results: list[dict[str, Any]] = []
    try:
        import boto3

        boto3.client("s3", endpoint_url=url).create_bucket(Bucket=BUCKET)
        for shape in shapes:
            src = work / f"src-{shape}"
            if shape == "large":
                write_random(src / "model.bin", parse_size(args.large))
            else:
                size = parse_size(args.file_size)
                for i in range(args.files):
                    write_random(src / f"shard{i // 100:02d}" / f"f{i:04d}.bin", size)
            for system in systems:
                prefix = f"{system}-{shape}-{uuid.uuid4().hex[:8]}"
                spec = {
                    "system": system,
                    "endpoint": url,
                    "bucket": BUCKET,
                    "prefix": prefix,
                    "src": str(src),
                    "dst": str(work / f"dst-{prefix}"),
                    "options": {},
                }
                r = run_child(spec)
                r.update(system=system, shape=shape)
                r["up_MBps"] = r["bytes"] / r["upload_s"] / 1e6
                r["down_MBps"] = r["bytes"] / r["download_s"] / 1e6
                results.append(r)
                print(
                    f"{shape:6s} {system:10s} {r['files']:5d} files {r['bytes'] / MiB:7.0f} MiB"
                    f"  up {r['up_MBps']:7.1f} MB/s ({r['upload_s']:6.2f} s)"
                    f"  down {r['down_MBps']:7.1f} MB/s ({r['download_s']:6.2f} s)"
                    f"  peak +{r['peak_growth'] / MiB:6.1f} MiB  cpu {r['cpu_s']:5.1f} s"
                    f"  ok={r['round_trip_ok']}",
                    flush=True,
                )
                empty_prefix(url, prefix)
            shutil.rmtree(src, ignore_errors=True)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)

    status = 0
    print()
    for shape in shapes:
        ours = next(
            (r for r in results if r["shape"] == shape and r["system"] == "trialflow"), None
        )
        peer = next((r for r in results if r["shape"] == shape and r["system"] == "boto3"), None)
        if ours and peer:
            up = ours["up_MBps"] / peer["up_MBps"]
            down = ours["down_MBps"] / peer["down_MBps"]
            total = (peer["upload_s"] + peer["download_s"]) / (
                ours["upload_s"] + ours["download_s"]
            )
            print(
                f"{shape:6s} trialflow/boto3 speed: upload {up:.2f}x  download {down:.2f}x"
                f"  round trip {total:.2f}x  {'OK' if min(up, down) >= 1.0 else 'BELOW TARGET'}"
            )
            if min(up, down) < 1.0:
                status = 1
        if ours:
            bound = ours["budget_bytes"] + 50 * MiB
            ok = ours["peak_growth"] <= bound
            print(
                f"{shape:6s} trialflow peak memory growth {ours['peak_growth'] / MiB:.1f} MiB"
                f" (bound {bound / MiB:.0f} MiB: {'OK' if ok else 'EXCEEDED'})"
            )
            if not ok:
                status = 1
    out_dir = REPO / "benchmarks" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "storage.json").write_text(json.dumps(results, indent=1))
    return status


if __name__ == "__main__":
    sys.exit(main())
