"""Node-to-node directory copy: ``transfer.copy_dir`` against the disk's own speed for
the same files (the limit) and against Ray's own cross-node path (the peer).

For each size (512 MiB and 1 GiB by default) a checkpoint-like directory is written once
(one large "model" file, six shards, 96 small files in nested folders, random bytes),
then, in each of ``--repeats`` rounds, one after another:

* ``disk``: the same files (paths and sizes) written from memory as ``dd conv=fsync``
  writes them (buffered writes, an fsync per file, then the directories): what this
  machine's disk does right now, the limit a durable copy can approach;
* ``direct``: the same, with files of 4 MiB or more written ``O_DIRECT`` (as ``dd
  oflag=direct``), the faster way when the machine holds much dirty page cache; the
  **limit** of a round is the faster of ``disk`` and ``direct``;
* ``dd``: the same number of bytes as one file, buffered writes and one fsync: the
  disk's bandwidth alone, without the per-file fsyncs a tree of files costs;
* ``sink``: our receiving end alone, fed the frames from memory (no reading, no
  network): what our writer gets out of the disk (two O_DIRECT writes in flight into
  preallocated files, fsyncs in the background), which can beat both ``dd`` ways;
* ``ours``: ``transfer.copy_dir`` between two ``ray.cluster_utils`` nodes (default chunk
  size and window, delta off), durable when it returns;
* ``ray``: Ray Tune's ``_PackActor`` + ``_unpack_from_actor`` (what
  ``sync_dir_between_nodes`` does across nodes), pinned by node id, no size limit, no
  fsync;

and, if asked, on one node: ``copytree`` (``shutil.copytree`` in the driver),
``ours-link`` (``copy_dir`` same node, hard links), ``ours-copy`` (``hardlink=False``).

Every measured copy runs in a fresh interpreter with a fresh cluster (``_transfer_child``)
and fresh directories, so its memory is not hidden in arenas a previous copy grew. By
default the cluster is first warmed by one 2 MiB copy by the same system (worker pools
started, modules imported); Ray's path still starts its own pack actor per copy, as it
always does. ``--cold`` skips the warm-up. The machine is shared and its disk is noisy,
so each system runs ``--repeats`` times, interleaved, each run starting with the page
cache flushed; the summary gives medians with their range, and the ratios of ours to
the limit and to each other system per round (neighbouring runs share the machine's
mood), as medians with their range. Figures per run: seconds and MB/s
end to end (start-up included), the peak memory growth during the copy (the machine's
used+shared memory, which other users disturb, and the PSS of the copy's own process
tree) and CPU seconds.

Usage::

    python -m benchmarks.bench_transfer                    # 512M and 1G, 3 rounds
    python -m benchmarks.bench_transfer --sizes 64M --repeats 1   # a quick run
    python -m benchmarks.bench_transfer --systems disk,ours,ray,ours-copy
    python -m benchmarks.bench_transfer --cold             # include worker start-up

Figures go to stdout and to ``benchmarks/out/transfer.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "out" / "transfer.json"
SYSTEMS = ("disk", "direct", "dd", "sink", "ours", "ray", "copytree", "ours-link", "ours-copy")
DEFAULT_SYSTEMS = ("disk", "direct", "dd", "sink", "ours", "ray")
MiB = 1024**2
GiB = 1024**3
#: The issues' targets: ours at >= 80% of the disk's write+fsync (the faster way), >= 3x
#: Ray's path, and memory flat (a few frame buffers per end, whatever the size).
DISK_TARGET = 0.8
SPEED_TARGET = 3.0
MEMORY_TARGET = 400 * MiB


def _size(text: str) -> int:
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1024, "M": MiB, "G": GiB}.get(text[-1:], 1)
    return int(float(text[:-1] if text[-1:] in "KMG" else text) * scale)


def _label(n: int) -> str:
    return f"{n // GiB} GiB" if n % GiB == 0 else f"{n // MiB} MiB"


def make_tree(root: Path, total: int, seed: int = 0) -> None:
    """A checkpoint-like tree of ``total`` bytes: 70% one file, 24% six shards, 6% in
    96 small files spread over nested folders."""
    rng = np.random.default_rng(seed)
    shutil.rmtree(root, ignore_errors=True)
    big = int(total * 0.70)
    shard = int(total * 0.04)
    small_total = total - big - 6 * shard
    sizes: dict[str, int] = {"model.bin": big}
    sizes.update({f"shards/shard-{i:02d}.bin": shard for i in range(6)})
    per_small, rest = divmod(small_total, 96)
    for i in range(96):
        sizes[f"state/part{i % 4}/sub{i % 3}/item-{i:03d}.pkl"] = per_small + (
            rest if i == 0 else 0
        )
    piece = 64 * MiB
    for rel, size in sizes.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            left = size
            while left:
                n = min(piece, left)
                f.write(rng.bytes(n))
                left -= n


def run_child(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    env = dict(os.environ)
    env.setdefault("RAY_AUTH_MODE", "disabled")
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    env["RAY_ADDRESS"] = ""
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "benchmarks._transfer_child", json.dumps(spec)]
    try:
        proc = subprocess.run(
            cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return {"system": spec["system"], "error": f"timeout after {timeout:.0f}s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[len("RESULT ") :])
            return result
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
    return {"system": spec["system"], "error": " | ".join(tail)}


def _fmt_row(size: int, r: dict[str, Any]) -> str:
    if "error" in r:
        return f"{_label(size):>8} {r['system']:>10}  ERROR {r['error']}"
    mbs = size / 1e6 / r["seconds"]
    per_gib = r["seconds"] / (size / GiB)
    startup = f"{r['startup_s']:.2f}" if r.get("startup_s") is not None else "-"
    return (
        f"{_label(size):>8} {r['system']:>10} {r['seconds']:8.2f} {mbs:8.0f} {per_gib:8.2f}"
        f" {r['peak_machine_bytes'] / MiB:10.0f} {r['peak_cluster_bytes'] / MiB:10.0f}"
        f" {startup:>8} {r['cpu_s']:6.1f} {'ok' if r['ok'] else 'MISMATCH':>4}"
    )


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _spread(values: list[float], fmt: str) -> str:
    """Median and range, e.g. ``372 (301-455)``."""
    if len(values) == 1:
        return format(values[0], fmt)
    return f"{format(_median(values), fmt)} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def _ok(r: dict[str, Any] | None) -> bool:
    return r is not None and "error" not in r


def summarize(size: int, rounds: list[dict[str, dict[str, Any]]]) -> tuple[list[str], bool]:
    """Lines for one size: each system's median MB/s (range), memory and CPU; then the
    ratios ours/disk and ours/ray per round, as median (range). Also whether the
    targets were met."""
    label, lines, failed = _label(size), [], False
    systems = [s for s in SYSTEMS if any(s in r for r in rounds)]
    for system in systems:
        runs = [r[system] for r in rounds if _ok(r.get(system))]
        errors = sum(1 for r in rounds if system in r and not _ok(r[system]))
        if not runs:
            lines.append(f"{label:>8} {system:>10}: every run failed")
            failed = True
            continue
        mbs = [size / 1e6 / r["seconds"] for r in runs]
        rss = [r["peak_cluster_bytes"] / MiB for r in runs]
        mem = [r["peak_machine_bytes"] / MiB for r in runs]
        cpu = [r["cpu_s"] for r in runs]
        lines.append(
            f"{label:>8} {system:>10}: {_spread(mbs, '.0f')} MB/s over {len(runs)} runs"
            f"{f' ({errors} failed)' if errors else ''}; pss +{_spread(rss, '.0f')} MiB,"
            f" machine +{_spread(mem, '.0f')} MiB, cpu {_spread(cpu, '.1f')} s"
        )
        failed |= errors > 0 or not all(r.get("ok") for r in runs)
    for r in rounds:
        best = [r[k]["seconds"] for k in ("disk", "direct") if _ok(r.get(k))]
        if best:
            r["limit"] = {"system": "limit", "seconds": min(best)}
    limits = [size / 1e6 / r["limit"]["seconds"] for r in rounds if "limit" in r]
    if limits:
        lines.append(f"{label:>8}      limit: {_spread(limits, '.0f')} MB/s (disk or direct)")
    for peer, target in (
        ("limit", DISK_TARGET),
        ("disk", None),
        ("direct", None),
        ("dd", None),
        ("sink", None),
        ("ray", SPEED_TARGET),
    ):
        ratios = [
            r[peer]["seconds"] / r["ours"]["seconds"]
            for r in rounds
            if _ok(r.get(peer)) and _ok(r.get("ours"))
        ]
        if ratios:
            met = target is None or _median(ratios) >= target
            verdict = (
                ""
                if target is None
                else f"; target >= {target:.2f}: " + ("met" if met else "NOT met")
            )
            lines.append(
                f"{label:>8}: ours / {peer} speed = {_spread(ratios, '.2f')} (median, range"
                f" over {len(ratios)} rounds{verdict})"
            )
            failed |= not met
    for name in ("ours-link", "ours-copy"):
        ratios = [
            r["copytree"]["seconds"] / r[name]["seconds"]
            for r in rounds
            if _ok(r.get("copytree")) and _ok(r.get(name))
        ]
        if ratios:
            lines.append(f"{label:>8}: {name} / copytree speed = {_spread(ratios, '.2f')}")
    ours = [r["ours"]["peak_cluster_bytes"] for r in rounds if _ok(r.get("ours"))]
    if ours and max(ours) >= MEMORY_TARGET:
        lines.append(f"{label:>8}: ours peak PSS {max(ours) / MiB:.0f} MiB >= target")
        failed = True
    return lines, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_transfer", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--sizes", default="512M,1G", help="comma-separated, e.g. 64M,1G")
    parser.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS), help=f"subset of {SYSTEMS}")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per size")
    parser.add_argument("--chunk-size", type=_size, default=None, help="ours: chunk size")
    parser.add_argument("--max-in-flight", type=int, default=None, help="ours: window")
    parser.add_argument("--object-store", type=_size, default=GiB, help="per node")
    parser.add_argument("--workdir", type=Path, default=None, help="where trees are written")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per copy")
    parser.add_argument(
        "--cold",
        action="store_true",
        help="no warm-up copy: the measured copy also pays worker start-up and imports",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    sizes = [_size(s) for s in args.sizes.split(",") if s.strip()]
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown system(s) {sorted(unknown)}; choose from {SYSTEMS}")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")

    workdir = Path(tempfile.mkdtemp(prefix="bench-transfer-", dir=args.workdir))
    warmup = workdir / "warmup"
    make_tree(warmup, 2 * MiB, seed=1)
    results: dict[str, list[dict[str, dict[str, Any]]]] = {}
    print(
        f"{'size':>8} {'system':>10} {'seconds':>8} {'MB/s':>8} {'s/GiB':>8}"
        f" {'mem(MiB)':>10} {'pss(MiB)':>10} {'startup':>8} {'cpu_s':>6} {'ok':>4}",
        flush=True,
    )
    try:
        for size in sizes:
            src = workdir / "src"
            make_tree(src, size)
            rounds: list[dict[str, dict[str, Any]]] = []
            results[_label(size)] = rounds
            for _ in range(args.repeats):
                rounds.append({})
                for system in systems:
                    spec = {
                        "system": system,
                        "src": str(src),
                        "dst": str(workdir / f"dst-{system}"),
                        "chunk_size": args.chunk_size,
                        "max_in_flight": args.max_in_flight,
                        "object_store": args.object_store,
                        "hardlink": {"ours-link": True, "ours-copy": False}.get(system),
                        "warmup": None if args.cold else str(warmup),
                    }
                    load = os.getloadavg()[0]
                    r = run_child(spec, args.timeout)
                    r["load_before"] = load
                    rounds[-1][system] = r
                    print(_fmt_row(size, r), flush=True)
            shutil.rmtree(src, ignore_errors=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print()
    failed = False
    for size in sizes:
        lines, size_failed = summarize(size, results[_label(size)])
        print("\n".join(lines))
        failed |= size_failed
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"time": time.time(), "results": results}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
