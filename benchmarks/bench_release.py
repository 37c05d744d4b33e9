"""Ray Tune's scalability release tests, scaled to this machine (issue 36, item 4).

Three of Ray Tune's release workloads (``release/tune_tests/scalability_tests``), each
timed against its ideal wall time (what it would take with no overhead at all), on ours
(``orchestrator.tune``, the facade) and on Ray Tune, both running the same script
(``_release_child``). Scaled from Ray's clusters to 2 real cores:

* ``bookkeeping_overhead``: many trials of one 1 s result each; it measures the cost
  of handling many trials. Ray: 10,000 trials on 16 CPUs, ideal 625 s, limit 800 s
  (1.28x). Here: 240 trials on 8 logical CPUs, 1 CPU each: ideal 240 / 8 x 1 s = 30 s.
* ``result_throughput_single_node``: trials reporting often; it measures the cost of
  many results. Ray: 96 trials x 50 results/s x 100 s, ideal 100 s, limit 120 s (1.2x).
  Here: 8 trials x 20 results/s x 20 s on 8 logical CPUs: ideal 20 s.
* ``durable_trainable``: class trainables checkpointing to cloud storage, 2 kept; it
  measures what durable checkpoints cost the experiment. Ray: 16 trials x 300 s,
  10 MB every 10 s to S3, ideal 300 s, limit 500 s (1.67x). Here: 4 trials x 20 s,
  one result a second, 4 MiB every 2 s to S3 (``moto_server``), 2 CPUs each on 8
  logical CPUs: ideal 20 s.

Each run is a fresh process with a private Ray; the clock covers ``tune.run`` only (Ray
is up before it, as in Ray's tests). Ray Tune gets its tests' tweaks
(``TUNE_GLOBAL_CHECKPOINT_S=100`` for bookkeeping, ``TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1``
for throughput); ours runs as shipped. Printed per workload and system: wall time,
ideal, their ratio (median [min-max] over ``--repeat`` runs) and the load average
before each run (the machine is shared; nothing here waits for it to be idle).
``bare`` is the floor this machine allows at its load: the same trials' sleeps (and
checkpoint writes) in plain processes, as many at once, no Ray and no tuning system;
``x bare`` is a system's wall time over it (its own overhead, load mostly cancelled).
Our target: within 1.05x of the ideal on each (on a loaded machine, read ``x bare``).
For the reporting workloads, ``ms/result`` is the trials' wall time per result after
their first (median; from timestamps the function puts in its results), apart from
the start-up (``first result at``, printed per run): the per-result cost, which a round
trip to the driver in each step shows at once, and which the load moves far less than
the wall time.

``python -m benchmarks.bench_release [--repeat N] [--systems ours tune] [--only NAME]``;
figures go to ``benchmarks/out/release.json`` after every run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Any

from ._restore_common import AWS_ENV, BUCKET
from ._shared import write_figures
from ._sweep_common import OUT_DIR, fmt, fmt_spread, ratio, run_child_module, spread

TARGET = 1.05
SYSTEMS = ("bare", "ours", "tune")
#: Each workload, scaled; ``limit`` is Ray's release threshold as a ratio to its ideal.
WORKLOADS: dict[str, dict[str, Any]] = {
    "bookkeeping_overhead": {
        "trials": 240, "iters": 1, "sleep_s": 1.0, "cpus": 8, "cpu_per_trial": 1,
        "limit": 800 / 625, "tune_env": {"TUNE_GLOBAL_CHECKPOINT_S": "100"},
    },
    "result_throughput_single_node": {
        "trials": 8, "iters": 400, "sleep_s": 0.05, "cpus": 8, "cpu_per_trial": 1,
        "limit": 120 / 100, "tune_env": {"TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1"},
    },
    "durable_trainable": {
        "trials": 4, "iters": 20, "sleep_s": 1.0, "cpus": 8, "cpu_per_trial": 2,
        "ckpt_every": 2, "ckpt_bytes": 4 << 20, "keep": 2, "limit": 500 / 300,
    },
}  # fmt: skip


def ideal_s(w: dict[str, Any]) -> float:
    """No overhead at all: waves of concurrent trials, each ``iters x sleep_s`` long."""
    concurrency = w["cpus"] // w["cpu_per_trial"]
    waves = -(-w["trials"] // concurrency)
    return waves * w["iters"] * w["sleep_s"]


def run_child(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    load = os.getloadavg()
    print(f"{spec['workload']} on {spec['system']} (load {load[0]:.1f})...", end=" ", flush=True)
    figures = run_child_module("_release_child", spec, timeout)
    figures.update(workload=spec["workload"], system=spec["system"], loadavg_before=list(load))
    if "wall_s" in figures:
        figures["ratio"] = figures["wall_s"] / spec["ideal_s"]
        flag = "" if figures.get("ok") else f" NOT OK {figures.get('states')}"
        pace = ""
        if "per_result_ms" in figures:
            pace = (
                f" (first result at {figures['first_result_s']:.1f} s, then "
                f"{figures['per_result_ms']:.1f} ms a result; {spec['sleep_s'] * 1000:.0f} "
                "ms of it the trial's own)"
            )
        print(
            f"{figures['wall_s']:.1f} s, x{figures['ratio']:.3f} of ideal{pace}{flag}", flush=True
        )
    else:
        print(f"failed: {figures.get('error')}", flush=True)
    return figures


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in runs:
        out.setdefault(r["workload"], {}).setdefault(r["system"], []).append(r)
    return {
        workload: {
            system: {
                "wall_s": spread([r.get("wall_s") for r in rs]),
                "ratio": spread([r.get("ratio") for r in rs]),
                "per_result_ms": spread([r.get("per_result_ms") for r in rs]),
                "first_result_s": spread([r.get("first_result_s") for r in rs]),
                "load": spread([r["loadavg_before"][0] for r in rs]),
                "ok": all(r.get("ok") for r in rs),
            }
            for system, rs in by_system.items()
        }
        for workload, by_system in out.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--only", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    from .bench_restore import moto_server

    os.environ.update(AWS_ENV)  # the children (and their Ray workers) inherit them
    path, runs = OUT_DIR / "release.json", []
    with moto_server() as endpoint, tempfile.TemporaryDirectory(prefix="bench-release-") as tmp:
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        for i in range(args.repeat):
            for name in args.only:
                for system in args.systems:
                    w = WORKLOADS[name]
                    spec = {
                        **w, "workload": name, "system": system, "ideal_s": ideal_s(w),
                        "bucket": BUCKET, "prefix": f"release/{system}-{i}",
                        "endpoint": endpoint, "local_dir": f"{tmp}/{system}-{i}",
                    }  # fmt: skip
                    if system != "tune":
                        spec.pop("tune_env", None)
                    runs.append(run_child(spec, args.timeout))
                    write_figures(path, "release", vars(args), summary(runs), runs)
    table = summary(runs)
    print(f"\nload average now: {os.getloadavg()}; {args.repeat} run(s) each")
    print(
        f"{'workload':30} {'system':6} {'ideal s':>7} {'wall s':>20} {'x ideal':>21} "
        f"{'x bare':>7} {'ms/result':>9}  Tune's limit, load"
    )
    for name, by_system in table.items():
        bare = by_system.get("bare", {}).get("wall_s", {}).get("median")
        for system, row in by_system.items():
            w = WORKLOADS[name]
            mark = "" if row["ok"] else "  (a trial did not finish)"
            print(
                f"{name:30} {system:6} {ideal_s(w):7.1f} {fmt_spread(row['wall_s']):>20} "
                f"{fmt_spread(row['ratio'], '.3f'):>21} "
                f"{fmt(ratio(row['wall_s']['median'], bare), '.3f'):>7} "
                f"{fmt(row['per_result_ms']['median']):>9}  {w['limit']:.2f}, "
                f"load {fmt_spread(row['load'])}{mark}"
            )
    ours = [row["ours"]["ratio"]["median"] for row in table.values() if "ours" in row]
    if ours and None not in ours:
        met = all(r <= TARGET for r in ours)
        print(f"ours within {TARGET}x of ideal on every workload: {'met' if met else 'MISSED'}")
    print(f"figures: {path}")
    return 0 if all(r.get("ok") for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
