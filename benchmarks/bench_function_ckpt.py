"""Checkpointing cost in a function trainable's epoch loop: trialflow against Ray Tune.

One trial (1 CPU) runs a function of ``--epochs`` epochs (8). Each epoch is a fixed
amount of pure-Python CPU work (``--work-s``, about 1.0 CPU-second, calibrated once
here and identical for every run), then, *with* checkpoints, one ``--size`` file
(64 MiB) written into a temporary directory and reported as the checkpoint; *without*,
the same loop reporting no checkpoint (and writing nothing). Storage is the S3
emulator (``moto_server`` on a free loopback port, started here as in
``bench_restore``), for both variants. ``keep`` checkpoints (2) are retained.

* ours: ``orchestrator.report(metrics, checkpoint=d)``; ``report`` moves ``d`` into
  the actor's scratch space and returns when the driver asks for the next epoch, and
  the upload runs in the node's persister while the function trains on;
* Tune: ``ray.tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))``,
  which uploads ``d`` to storage before it returns.

Figures, by the function's own clock (see ``_function_ckpt_common``):

* epoch time: the gap between consecutive reports (``epochs - 1`` gaps per run): one
  epoch's work and write plus the previous report call. Shown as the median and the
  [min-max] over every gap of every repeat;
* work: wall seconds of the CPU work alone (it grows when other processes, an upload
  or the emulator, take the CPU from it); write: seconds to write the checkpoint
  file; report: seconds a report call blocked the function (medians);
* with / without: the median epoch time with checkpoints over the median without, for
  each system (1.0 = checkpointing costs the loop nothing);
* kept: checkpoints each system lists at the end; S3 MiB: bytes under the run's
  prefix at the end (checks that checkpoints did reach storage);
* CPU seconds of the run by process (driver, trial workers, our persister, raylet, GCS,
  other), the emulator's, and the whole machine's busy fraction during the run: an
  overlapped upload costs CPU the epoch's work competes for on 2 cores, and a busy
  machine (other users) slows the work of either system.

Each run is a fresh subprocess with its own Ray (2 CPUs); the 1-minute load average
and the hypervisor's steal are recorded before/during each run.

Usage::

    python -m benchmarks.bench_function_ckpt              # 8 epochs, 64 MiB
    python -m benchmarks.bench_function_ckpt --quick      # 4 epochs, 16 MiB
    python -m benchmarks.bench_function_ckpt --epochs 12 --size 128M --repeat 3

Figures go to stdout and to ``benchmarks/out/function_ckpt.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from ._core_common import _cpu_ticks, settle, steal_seconds
from ._function_ckpt_common import calibrate, median, parse_child_output
from ._restore_common import BUCKET
from ._shared import write_figures
from .bench_restore import _child_env, _empty_prefix, _s3_client, fmt_size, moto_server, parse_size

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "out" / "function_ckpt.json"
SYSTEMS = ("ours", "tune")
LABELS = {"ours": "ours", "tune": "Ray Tune"}
#: CPU seconds by kind of process (``_core_common.CpuSampler``), and the emulator's.
CPU_KINDS = ("driver", "workers", "persister", "raylet", "gcs", "other")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_function_ckpt", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="16 MiB, 4 epochs")
    parser.add_argument("--epochs", type=int, default=None, help="epochs per run (8; quick 4)")
    parser.add_argument("--size", default=None, help="checkpoint size (64M; quick 16M)")
    parser.add_argument(
        "--work-s", type=float, default=1.0, help="CPU-seconds of work per epoch (calibrated)"
    )
    parser.add_argument("--keep", type=int, default=2, help="checkpoints retained")
    parser.add_argument("--repeat", type=int, default=1, help="runs per system and variant")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument(
        "--cooldown", type=float, default=5.0, help="seconds of rest before each run"
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.epochs is None:
        args.epochs = 4 if args.quick else 8
    args.size = parse_size(args.size or ("16M" if args.quick else "64M"))
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    bad = set(args.systems) - set(SYSTEMS)
    if bad:
        parser.error(f"unknown system(s) {sorted(bad)}; choose from {SYSTEMS}")
    if args.epochs < 2:
        parser.error("--epochs must be >= 2 (an epoch time is the gap between two reports)")
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    return args


def _s3_usage(url: str, prefix: str) -> tuple[int, int]:
    """(objects, bytes) under ``prefix`` in the emulator's bucket."""
    s3 = _s3_client(url)
    count = total = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        for obj in page.get("Contents", []):
            count += 1
            total += int(obj["Size"])
    return count, total


def _moto_cpu_s() -> float | None:
    """CPU seconds the emulator (a child of this process) has used so far."""
    import psutil

    total = None
    for proc in psutil.Process().children(recursive=True):
        try:
            if "moto_server" in " ".join(proc.cmdline()):
                times = proc.cpu_times()
                total = (total or 0.0) + times.user + times.system
        except psutil.Error:
            continue
    return total


def _busy_ticks() -> tuple[int, int]:
    """(busy, all) CPU ticks of the whole machine so far: other users' work included."""
    ticks = _cpu_ticks()
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


def run_one(spec: dict[str, Any], timeout: float, cooldown: float) -> dict[str, Any]:
    """Run ``spec`` in a fresh interpreter (so a fresh Ray); return its figures, with
    the machine's load before, and the emulator's CPU, the machine's busy fraction and
    the hypervisor's steal during the run."""
    settle(cooldown=cooldown, timeout=30.0)
    load = os.getloadavg()
    steal0 = steal_seconds()
    moto0 = _moto_cpu_s()
    busy0, all0 = _busy_ticks()
    started = time.monotonic()
    command = [sys.executable, "-m", "benchmarks._function_ckpt_child", json.dumps(spec)]
    try:
        proc = subprocess.run(
            command,
            cwd=ROOT,
            env=_child_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"spec": spec, "ok": False, "error": f"timed out after {timeout:.0f} s"}
    figures = parse_child_output(proc.stdout)
    if figures is None:
        tail = [
            line
            for line in proc.stderr.strip().splitlines()
            if "(raylet)" not in line and line.strip()
        ][-15:]
        return {
            "spec": spec,
            "ok": False,
            "load_before": load,
            "error": f"exit status {proc.returncode}, no figures; stderr tail:\n" + "\n".join(tail),
        }
    moto1 = _moto_cpu_s()
    busy1, all1 = _busy_ticks()
    figures.update(
        spec=spec,
        load_before=load,
        steal_s=steal_seconds() - steal0,
        process_s=time.monotonic() - started,
        moto_cpu_s=None if moto0 is None or moto1 is None else moto1 - moto0,
        machine_busy=(busy1 - busy0) / (all1 - all0) if all1 > all0 else None,
    )
    return figures


def _f(value: float | None, pattern: str) -> str:
    if value is None:
        width = pattern.split(".")[0]
        return "-".rjust(int(width) if width.isdigit() else 0)
    return format(value, pattern)


def summarize(args: argparse.Namespace, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per (system, variant): the pooled epoch gaps' median and range, medians of the
    parts; per system: median epoch with checkpoints / median without."""
    rows: dict[str, dict[str, Any]] = {}
    ratios: dict[str, float | None] = {}
    for system in args.systems:
        for checkpoint in (True, False):
            mine = [
                r
                for r in runs
                if r["spec"]["system"] == system and r["spec"]["checkpoint"] == checkpoint
            ]
            ok = [r for r in mine if r.get("ok")]
            gaps = [g for r in ok for g in r["epoch_s"]]
            rows[f"{system}/{'with' if checkpoint else 'without'}"] = {
                "system": system,
                "checkpoint": checkpoint,
                "runs": len(mine),
                "ok": bool(mine) and len(ok) == len(mine),
                "epoch_median_s": median(gaps),
                "epoch_min_s": min(gaps) if gaps else None,
                "epoch_max_s": max(gaps) if gaps else None,
                "epoch_run_medians_s": [r["epoch_median_s"] for r in ok],
                "work_median_s": median([w for r in ok for w in r["work_s"]]),
                "work_cpu_median_s": median([w for r in ok for w in r["work_cpu_s"]]),
                "write_median_s": median([w for r in ok for w in r["write_s"]]),
                "report_median_s": median([w for r in ok for w in r["report_s"]]),
                "run_median_s": median([r["run_s"] for r in ok]),
                "kept": median([r.get("checkpoints_kept") for r in ok]),
                "s3_mib": median([r.get("s3_bytes", 0) / (1 << 20) for r in ok]),
                "load_before": [r.get("load_before", [None])[0] for r in mine],
                "steal_s": median([r.get("steal_s") for r in mine]),
                "machine_busy": median([r.get("machine_busy") for r in mine]),
                "moto_cpu_s": median([r.get("moto_cpu_s") for r in ok]),
                **{
                    f"cpu_{kind}_s": median([(r.get("cpu_s") or {}).get(kind) for r in ok])
                    for kind in CPU_KINDS
                },
            }
        with_, without = rows[f"{system}/with"], rows[f"{system}/without"]
        a, b = with_["epoch_median_s"], without["epoch_median_s"]
        ratios[system] = a / b if a is not None and b else None
    return {"rows": rows, "with_over_without": ratios}


def print_report(args: argparse.Namespace, summary: dict[str, Any]) -> None:
    print()
    print(
        f"{args.epochs} epochs of {args.work_s:g} CPU-s work ({args.iterations:,} iterations), "
        f"checkpoint {fmt_size(args.size)} to S3 (moto), keep {args.keep}; "
        f"{args.repeat} run(s) each"
    )
    print(
        "epoch = gap between consecutive reports (median [min-max] over all gaps); "
        "work/write/report = medians of each part; load = 1-min load average before each run"
    )
    head = (
        f"{'system':<9} {'ckpt':>7} {'epoch s':>7} {'[min-max]':>13} {'work s':>7} "
        f"{'cpu s':>6} {'write s':>8} {'report s':>9} {'run s':>6} {'kept':>5} "
        f"{'S3 MiB':>7} {'steal s':>8}  load"
    )
    print(head)
    print("-" * len(head))
    for row in summary["rows"].values():
        ckpt = fmt_size(args.size) if row["checkpoint"] else "none"
        spread = f"[{_f(row['epoch_min_s'], '.2f')}-{_f(row['epoch_max_s'], '.2f')}]"
        loads = ", ".join(_f(x, ".1f") for x in row["load_before"])
        flag = "" if row["ok"] else "  FAILED"
        print(
            f"{LABELS[row['system']]:<9} {ckpt:>7} {_f(row['epoch_median_s'], '7.2f')} "
            f"{spread:>13} {_f(row['work_median_s'], '7.2f')} "
            f"{_f(row['work_cpu_median_s'], '6.2f')} {_f(row['write_median_s'], '8.3f')} "
            f"{_f(row['report_median_s'], '9.3f')} {_f(row['run_median_s'], '6.1f')} "
            f"{_f(row['kept'], '5.0f')} {_f(row['s3_mib'], '7.1f')} "
            f"{_f(row['steal_s'], '8.1f')}  {loads}{flag}"
        )
    print()
    print(
        "CPU seconds per run (medians) by process, the emulator's (moto), and the whole "
        "machine's busy fraction during the run (other users' work included)"
    )
    head = (
        f"{'system':<9} {'ckpt':>7} "
        + " ".join(f"{k:>9}" for k in CPU_KINDS)
        + f" {'moto':>7} {'busy %':>7}"
    )
    print(head)
    print("-" * len(head))
    for row in summary["rows"].values():
        ckpt = fmt_size(args.size) if row["checkpoint"] else "none"
        busy = None if row["machine_busy"] is None else row["machine_busy"] * 100
        print(
            f"{LABELS[row['system']]:<9} {ckpt:>7} "
            + " ".join(_f(row[f"cpu_{k}_s"], "9.1f") for k in CPU_KINDS)
            + f" {_f(row['moto_cpu_s'], '7.1f')} {_f(busy, '7.0f')}"
        )
    print()
    for system, ratio in summary["with_over_without"].items():
        print(
            f"{LABELS[system]:<9} median epoch with / without checkpoints: "
            f"{_f(ratio, '.2f')}{'' if ratio is None else 'x'}"
        )


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    args.iterations = calibrate(args.work_s)
    print(
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} "
        f"CPUs; {args.work_s:g} CPU-s of work = {args.iterations:,} iterations",
        flush=True,
    )
    variants = [(s, c) for s in args.systems for c in (True, False)]
    runs: list[dict[str, Any]] = []
    total = len(variants) * args.repeat
    n = 0
    with moto_server() as url:
        for attempt in range(args.repeat):
            order = variants if attempt % 2 == 0 else list(reversed(variants))
            for system, checkpoint in order:
                n += 1
                spec = {
                    "system": system,
                    "checkpoint": checkpoint,
                    "epochs": args.epochs,
                    "size": args.size,
                    "iterations": args.iterations,
                    "keep": args.keep,
                    "endpoint": url,
                    "prefix": f"bench-fnckpt-{uuid.uuid4().hex[:8]}",
                }
                what = f"with {fmt_size(args.size)}" if checkpoint else "without"
                print(
                    f"[{n}/{total}] {LABELS[system]} {what} checkpoints (run {attempt + 1})...",
                    end=" ",
                    flush=True,
                )
                figures = run_one(spec, args.timeout, args.cooldown)
                try:
                    figures["s3_objects"], figures["s3_bytes"] = _s3_usage(url, spec["prefix"])
                except Exception as err:  # noqa: BLE001 - a figure, not the run
                    figures["s3_error"] = repr(err)
                _empty_prefix(url, spec["prefix"])
                runs.append(figures)
                if figures.get("ok"):
                    print(
                        f"epoch {_f(figures['epoch_median_s'], '.2f')} s "
                        f"(report {_f(median(figures['report_s']), '.3f')} s), "
                        f"kept {figures.get('checkpoints_kept')}, "
                        f"S3 {figures.get('s3_bytes', 0) / (1 << 20):.0f} MiB, "
                        f"load {figures['load_before'][0]:.1f}, "
                        f"steal {figures['steal_s']:.1f} s",
                        flush=True,
                    )
                else:
                    print(f"FAILED: {figures.get('error', figures)}", flush=True)
                _write(args, runs)
    print_report(args, summarize(args, runs))
    print(f"\nload average at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"figures written to {args.out}")
    return 0 if all(r.get("ok") for r in runs) else 1


def _write(args: argparse.Namespace, runs: list[dict[str, Any]]) -> None:
    write_figures(args.out, "function_ckpt", vars(args), summarize(args, runs), runs)


if __name__ == "__main__":
    sys.exit(main())
