"""Scale: N trivial trials, does the driver stay flat? (issue 36, item 3)

The issue's workload: a sweep of N trials of 2 trivial steps each, 8 at once, 0.25 CPU
each, one run per size, timed once Ray is up. Each run is a fresh child process
(``_scale_child``): ours on real Ray, ours on the tests' fake Ray (``--systems fake``:
the engine's own cost, no Ray processes, quick), and Ray Tune at the smallest size.

Printed per run: wall time per trial (Ray's start left out), the driver's CPU time per
trial (a steadier measure on a loaded machine; on the fake Ray it includes the in-process
actors'), the driver's peak RSS, its RSS growth over the sweep, and that growth per
trial; on the fake Ray, what the journal's writes cost storage (bytes a write, the last
head's size). Then, per system, the slopes between sizes (extra time and extra RSS per extra
trial: the fixed costs cancel out).
Targets (issue 36): time per trial at N=10,000 within 1.15x of N=1,000's; RSS growth from
N=1,000 to N=10,000 <= 20 MiB (about 2 KiB per finished trial).

This machine is shared and often loaded: the load average is printed beside every run;
the runs are not rested or repeated (use ``bench_sweep`` for careful timings).

Usage::

    python -m benchmarks.bench_scale                          # ours 1k/4k/10k + Tune 1k
    python -m benchmarks.bench_scale --systems fake --sizes 1000 4000
    python -m benchmarks.bench_scale --systems ours --sizes 1000 4000 --tune-at 0

Figures go to stdout and to ``benchmarks/out/scale.json`` (after every run).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from ._shared import write_figures
from ._sweep_common import OUT_DIR, run_child_module

SIZES = (1_000, 4_000, 10_000)
WORKLOAD = {"steps": 2, "step_s": 0.0, "concurrency": 8, "cpu": 0.25, "seed": 0}
TIME_TARGET, RSS_TARGET_MIB = 1.15, 20.0


def run_child(system: str, trials: int, timeout: float) -> dict[str, Any]:
    spec = {"system": system, "trials": trials, **WORKLOAD}
    load = os.getloadavg()[0]
    print(f"{system} N={trials} (load {load:.1f})...", end=" ", flush=True)
    started = time.monotonic()
    figures = run_child_module("_scale_child", spec, timeout)
    figures.update(system=system, trials=trials, load_before=load)
    figures["wall_s"] = time.monotonic() - started
    if "after_ray_s" in figures:
        figures["ms_per_trial"] = 1000 * figures["after_ray_s"] / trials
        figures["rss_growth_mib"] = figures["rss_end_mib"] - figures["rss_after_ray_mib"]
        figures["rss_growth_per_trial_kib"] = figures["rss_growth_mib"] * 1024 / trials
        figures["cpu_ms_per_trial"] = 1000 * figures.get("driver_cpu_s", 0.0) / trials
        print(
            f"{figures['ms_per_trial']:.1f} ms/trial ({figures['cpu_ms_per_trial']:.2f} "
            "ms driver CPU), peak RSS "
            f"{figures.get('peak_rss_mib', 0):.0f} MiB, growth "
            f"{figures['rss_growth_mib']:.1f} MiB ({figures['rss_growth_per_trial_kib']:.1f} "
            f"KiB/trial){_journal(figures)}{'' if figures.get('ok') else ' NOT OK'}",
            flush=True,
        )
    else:
        print(f"failed: {figures.get('error')}", flush=True)
    return figures


def _journal(figures: dict[str, Any]) -> str:
    """What a journal write cost storage (the fake Ray's runs: issue 36, "the journal's
    write cost per result O(1) in N")."""
    if "journal_kib_per_write" not in figures:
        return ""
    return (
        f"; journal {figures['journal_writes']} writes, "
        f"{figures['journal_kib_per_write']:.1f} KiB a write, "
        f"last head {figures['journal_head_kib']:.1f} KiB, "
        f"of which the sweep's document {figures.get('journal_sweep_doc_kib', 0):.1f} KiB"
    )


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per system: time per trial largest/smallest, and RSS growth between them."""
    out: dict[str, Any] = {}
    for system in sorted({r["system"] for r in runs}):
        ok = sorted(
            (r for r in runs if r["system"] == system and "ms_per_trial" in r),
            key=lambda r: r["trials"],
        )
        if len(ok) < 2:
            continue
        small, big = ok[0], ok[-1]
        extra = big["trials"] - small["trials"]
        out[system] = {
            "sizes": [small["trials"], big["trials"]],
            "time_per_trial_ratio": big["ms_per_trial"] / small["ms_per_trial"],
            "cpu_per_trial_ratio": big["cpu_ms_per_trial"] / (small["cpu_ms_per_trial"] or 1e-9),
            "ms_per_extra_trial": 1000 * (big["after_ray_s"] - small["after_ray_s"]) / extra,
            "rss_end_growth_mib": big["rss_end_mib"] - small["rss_end_mib"],
            "kib_per_extra_trial": (big["rss_growth_mib"] - small["rss_growth_mib"]) * 1024 / extra,
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--systems", nargs="+", default=["ours"], choices=["ours", "fake"])
    parser.add_argument("--tune-at", type=int, default=SIZES[0], help="0: no Ray Tune run")
    parser.add_argument("--timeout", type=float, default=3600.0)
    args = parser.parse_args()
    runs: list[dict[str, Any]] = []
    path = OUT_DIR / "scale.json"
    plan = [(s, n) for s in args.systems for n in args.sizes]
    if args.tune_at:
        plan.append(("tune", args.tune_at))
    for system, trials in plan:
        runs.append(run_child(system, trials, args.timeout))
        write_figures(path, "scale", vars(args), summary(runs), runs)
    table = summary(runs)
    print(f"\nload average now: {os.getloadavg()}")
    for system, row in table.items():
        a, b = row["sizes"]
        print(
            f"{system}: N={a}->{b}: time/trial x{row['time_per_trial_ratio']:.2f} "
            f"(target <= {TIME_TARGET}; driver CPU/trial x{row['cpu_per_trial_ratio']:.2f}, "
            f"steadier under load), {row['ms_per_extra_trial']:.1f} ms per extra trial; "
            f"RSS +{row['rss_end_growth_mib']:.1f} MiB (target <= {RSS_TARGET_MIB} for "
            f"1k->10k), {row['kib_per_extra_trial']:.1f} KiB per extra trial"
        )
    print(f"figures: {path}")
    return 0 if all(r.get("ok") for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
