"""Content-addressed checkpoints on a local disk against full copies (issue 36 item 1).

``python -m benchmarks.probe_dedup_local [--repeats N] [--dir PATH]`` prints, for each
shape of checkpoint, the bytes on disk after N checkpoints of one trial (each inode
counted once) and the median latency of a save (``put_checkpoint`` on the event loop,
``put_small_checkpoint`` in the calling thread, as a trial actor commits) and of a
restore, with ``TRIALFLOW_CHECKPOINT_DEDUP=0`` (today's full copies) and on (blobs).
The two modes alternate save by save, each into its own root, so a load spike hits
both; the CPU time of each save (the whole process's) is printed beside its wall time,
as the figure a loaded machine disturbs least. fsync is on (the default).

Shapes: ``frozen48+4`` (a 48 MiB part that never changes, a 4 MiB one that does: the
issue's PBT model), ``all-new52`` (52 MiB, every byte new at each save: the worst case
for blobs), ``small2+1`` (2 MiB frozen, 1 MiB changing: committed in place) and
``tiny`` (one 100-byte file: the per-save overhead). ``--aa`` stores full copies in
both columns: on a shared, loaded machine the ratio it prints is the noise floor.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from storage import LocalStorage
from storage.dedup import DEDUP_ENV

MiB = 1 << 20


def shapes(frozen: bytes) -> dict[str, Callable[[Path, int], bool]]:
    """Each shape writes checkpoint number ``i`` into a directory; True if it is small
    (saved with ``put_small_checkpoint``)."""

    def frozen48(d: Path, i: int) -> bool:
        (d / "backbone.bin").write_bytes(frozen)
        (d / "head.bin").write_bytes(os.urandom(4 * MiB))
        return False

    def all_new(d: Path, i: int) -> bool:
        (d / "model.bin").write_bytes(os.urandom(52 * MiB))
        return False

    def small(d: Path, i: int) -> bool:
        (d / "backbone.bin").write_bytes(frozen[: 2 * MiB])
        (d / "head.bin").write_bytes(os.urandom(MiB))
        return True

    def tiny(d: Path, i: int) -> bool:
        (d / "state.json").write_bytes(b'{"step": %d}' % i + b" " * 88)
        return True

    return {"frozen48+4": frozen48, "all-new52": all_new, "small2+1": small, "tiny": tiny}


def disk_bytes(root: Path) -> int:
    seen: dict[tuple[int, int], int] = {}
    for p in root.rglob("*"):
        if p.is_file():
            st = p.stat()
            seen[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    return sum(seen.values())


async def run_shape(
    name: str, make: Callable[[Path, int], bool], repeats: int, base: Path, aa: bool = False
) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    saves: dict[str, list[float]] = {"full": [], "blobs": []}
    cpus: dict[str, list[float]] = {"full": [], "blobs": []}
    loads: dict[str, list[float]] = {"full": [], "blobs": []}
    roots = {mode: base / name / mode for mode in saves}
    stores = {}
    for mode, root in roots.items():
        root.mkdir(parents=True)
        stores[mode] = LocalStorage(str(root))
        await stores[mode].open()
    scratch = base / name / "scratch"
    for i in range(repeats):
        for mode in ("full", "blobs") if i % 2 else ("blobs", "full"):
            os.environ[DEDUP_ENV] = "0" if mode == "full" or aa else "1"
            src = scratch / f"{mode}-{i}"
            src.mkdir(parents=True)
            small = make(src, i)
            st = stores[mode]
            key = f"trial/checkpoint_{i:06d}"
            start, cpu = time.perf_counter(), time.process_time()
            if small:
                assert st.put_small_checkpoint(src, key) is not None
            else:
                await st.put_checkpoint(src, key)
            took, cpu = time.perf_counter() - start, time.process_time() - cpu
            if i:  # the first save of a trial publishes every blob: steady state after
                saves[mode].append(took)
                cpus[mode].append(cpu)
            shutil.rmtree(src)
            back = scratch / f"back-{mode}-{i}"
            start = time.perf_counter()
            if not small or st.get_small_checkpoint(key, back) is None:
                await st.get_checkpoint(key, back)
            loads[mode].append(time.perf_counter() - start)
            shutil.rmtree(back)
    for mode, st in stores.items():
        await st.aclose()
        out[mode] = {
            "save_ms": statistics.median(saves[mode]) * 1000,
            "cpu_ms": statistics.median(cpus[mode]) * 1000,
            "restore_ms": statistics.median(loads[mode]) * 1000,
            "disk_mib": disk_bytes(roots[mode]) / MiB,
        }
    os.environ.pop(DEDUP_ENV, None)
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=9, help="checkpoints per shape and mode")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--only", default=None, help="one shape")
    parser.add_argument(
        "--aa", action="store_true", help="full copies in both columns: the noise floor"
    )
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="dedup-probe-", dir=args.dir or os.getcwd()))
    frozen = os.urandom(48 * MiB)
    try:
        print(f"{args.repeats} checkpoints of one trial per shape; medians of saves 2..N")
        print(
            f"{'shape':12} {'mode':6} {'disk MiB':>9} {'save ms':>9} {'save CPU ms':>12} "
            f"{'restore ms':>11}"
        )
        for name, make in shapes(frozen).items():
            if args.only and name != args.only:
                continue
            res = await run_shape(name, make, args.repeats, base, args.aa)
            for mode in ("full", "blobs"):
                r = res[mode]
                print(
                    f"{name:12} {mode:6} {r['disk_mib']:9.1f} {r['save_ms']:9.2f} "
                    f"{r['cpu_ms']:12.2f} {r['restore_ms']:11.2f}"
                )
            ratio = res["blobs"]["save_ms"] / res["full"]["save_ms"]
            cpu = res["blobs"]["cpu_ms"] / res["full"]["cpu_ms"]
            space = res["blobs"]["disk_mib"] / res["full"]["disk_mib"]
            print(f"{name:12} blobs/full: disk {space:.2f}x, save {ratio:.2f}x, CPU {cpu:.2f}x")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
