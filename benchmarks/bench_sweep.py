"""Sweeps: trialflow's ``Orchestrator.sweep`` against Ray Tune's ``Tuner``, side by side.

Two workloads, each system in a fresh child process with its own ``ray.init(num_cpus=2)``,
the systems interleaved across repeats, a rest before each run (this VM is throttled
under sustained load):

* ``short`` -- many short trials: 200 trials x 20 steps of 10 ms (``time.sleep``), 4 at
  once (0.5 CPU each: 2 CPUs hold exactly 4), both with actor reuse (Tune
  ``reuse_actors=True`` with a ``reset_config``; ours' default). Figures: wall time from
  before Ray starts to the end (``e2e``), Ray's start-up, and the *overhead* over the
  ideal (200 x 20 x 10 ms / 4 = 10 s), with and without Ray's start-up.
  Targets: ours' overhead at most a third of Tune's; ours within 20% of the ideal once
  Ray is up (issue 27; it was 30%).
* ``big`` -- 1,000 trials x 10 trivial steps, 20 at once (0.1 CPU each). Figures: the
  driver process's CPU time per result (from Ray up to the end of the sweep) and its
  memory growth per trial (RSS at the end minus after Ray's start, / trials); ours also
  at 100 trials, and the slopes between the two sizes (CPU per extra result, RSS per
  extra trial: the fixed costs of a sweep cancel out). Targets: ours' CPU per result
  flat from 100 to 1,000 trials (within +-30%: O(1) per completion) and at most half
  of Tune's at 1,000.

Usage::

    python -m benchmarks.bench_sweep                  # both workloads, 3 repeats
    python -m benchmarks.bench_sweep --quick          # 40 x 20, and 30/100 trials: a sanity run
    python -m benchmarks.bench_sweep --only big --systems ours

Figures go to stdout and to ``benchmarks/out/sweep.json`` (after every run).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._shared import write_figures
from ._sweep_common import OUT_DIR, Runner, fmt_spread, ratio, spread, verdict

SYSTEMS = ("ours", "tune")
LABELS = {"ours": "ours", "tune": "Ray Tune"}
#: ours' overhead / Tune's, at most; ours' time after Ray's start / the ideal, at most.
OVERHEAD_TARGET, IDEAL_TARGET = 1 / 3, 1.2
#: ours' CPU per result at the largest size / at the smallest, within; ours / Tune's.
FLAT_TARGET, CPU_TARGET = 0.3, 0.5
#: ratio key -> (what it is, the target's test, the target as shown).
VERDICTS: dict[str, tuple[str, Callable[[float], bool], str]] = {
    "short_overhead_s_ours_over_tune": (
        "short: overhead incl. Ray start, ours / Tune",
        lambda v: v <= OVERHEAD_TARGET,
        "<= 0.33",
    ),
    "short_overhead_after_ray_s_ours_over_tune": (
        "short: overhead excl. Ray start, ours / Tune",
        lambda v: v <= OVERHEAD_TARGET,
        "<= 0.33",
    ),
    "short_ours_after_ray_over_ideal": (
        "short: ours' time after Ray up / ideal",
        lambda v: v <= IDEAL_TARGET,
        f"<= {IDEAL_TARGET}",
    ),
    "big_ours_cpu_flatness": (
        "big: ours' CPU/result, largest / smallest size",
        lambda v: abs(v - 1) <= FLAT_TARGET,
        f"1 +- {FLAT_TARGET}",
    ),
    "big_cpu_ours_over_tune": (
        "big: CPU/result at the largest size, ours / Tune",
        lambda v: v <= CPU_TARGET,
        f"<= {CPU_TARGET}",
    ),
}
FIELDS = (
    "e2e_s",
    "ray_up_s",
    "after_ray_s",
    "overhead_s",
    "overhead_after_ray_s",
    "max_running",
    "driver_cpu_us_per_result",
    "driver_cpu_s",
    "results",
    "rss_growth_per_trial_kib",
    "rss_end_mib",
    "steal_s",
    "load_before",
)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_sweep", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per system (medians)")
    parser.add_argument("--quick", action="store_true", help="40 short trials; 30/100 big")
    parser.add_argument("--systems", default="ours,tune", help=f"subset of {SYSTEMS}")
    parser.add_argument("--only", choices=("short", "big"), default=None)
    parser.add_argument("--short-trials", type=int, default=None, help="default 200 (quick 40)")
    parser.add_argument(
        "--big-sizes",
        default=None,
        help="trial counts for ours in 'big', comma-separated (default 100,1000; quick "
        "30,100); Tune runs the largest only unless --tune-all-sizes",
    )
    parser.add_argument("--tune-all-sizes", action="store_true")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    parser.add_argument("--cooldown", type=float, default=15.0, help="rest before each run, s")
    parser.add_argument(
        "--rest-ratio", type=float, default=0.5, help="rest >= this x the previous run's length"
    )
    parser.add_argument("--out", type=Path, default=OUT_DIR / "sweep.json")
    args = parser.parse_args(argv)
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if set(args.systems) - set(SYSTEMS) or not args.systems:
        parser.error(f"--systems: choose from {SYSTEMS}")
    if args.short_trials is None:
        args.short_trials = 40 if args.quick else 200
    sizes = args.big_sizes or ("30,100" if args.quick else "100,1000")
    args.big_sizes = sorted({int(s) for s in str(sizes).split(",") if s.strip()})
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    return args


def _plan(args: argparse.Namespace) -> list[tuple[str, list[dict[str, Any]]]]:
    """(workload, the specs of one round) for each workload; a round runs once per repeat."""
    plan = []
    if args.only in (None, "short"):
        base = {"workload": "short", "steps": 20, "step_s": 0.01, "concurrency": 4, "cpu": 0.5}
        specs = [{**base, "system": s, "trials": args.short_trials} for s in args.systems]
        plan.append(("short", specs))
    if args.only in (None, "big"):
        base = {"workload": "big", "steps": 10, "step_s": 0.0, "concurrency": 20, "cpu": 0.1}
        specs = []
        for system in args.systems:
            sizes = args.big_sizes
            if system == "tune" and not args.tune_all_sizes:
                sizes = sizes[-1:]
            specs += [{**base, "system": system, "trials": n} for n in sizes]
        plan.append(("big", specs))
    return plan


def _key(spec: dict[str, Any]) -> str:
    return f"{spec['workload']}/{spec['system']}/{spec['trials']}"


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Spreads per (workload, system, trials), and the ratios the targets are about."""
    rows: dict[str, dict[str, Any]] = {}
    for run in runs:
        rows.setdefault(_key(run["spec"]), {"spec": run["spec"], "runs": []})["runs"].append(run)
    for row in rows.values():
        mine = row.pop("runs")
        row["n"], row["ok"] = len(mine), all(r.get("ok") for r in mine)
        row.update({f: spread([r.get(f) for r in mine]) for f in FIELDS})

    def med(workload: str, system: str, trials: int | None, field: str) -> float | None:
        row = rows.get(f"{workload}/{system}/{trials}")
        return None if row is None else row[field]["median"]

    short = next(
        (r["spec"]["trials"] for r in rows.values() if r["spec"]["workload"] == "short"), None
    )
    big = sorted({r["spec"]["trials"] for r in rows.values() if r["spec"]["workload"] == "big"})
    ratios: dict[str, float | None] = {}
    if short is not None:
        for field in ("overhead_s", "overhead_after_ray_s"):
            ours, tune = med("short", "ours", short, field), med("short", "tune", short, field)
            ratios[f"short_{field}_ours_over_tune"] = ratio(ours, tune)
        ours_row = rows.get(f"short/ours/{short}")
        if ours_row is not None:
            ideal = (
                ours_row["spec"]["trials"]
                * ours_row["spec"]["steps"]
                * ours_row["spec"]["step_s"]
                / ours_row["spec"]["concurrency"]
            )
            ratios["short_ours_after_ray_over_ideal"] = ratio(
                ours_row["after_ray_s"]["median"], ideal
            )
    if big:
        field = "driver_cpu_us_per_result"
        lo, hi = big[0], big[-1]
        if lo != hi:
            ratios["big_ours_cpu_flatness"] = ratio(
                med("big", "ours", hi, field), med("big", "ours", lo, field)
            )
        ratios["big_cpu_ours_over_tune"] = ratio(
            med("big", "ours", hi, field), med("big", "tune", hi, field)
        )
        if lo != hi:  # the slope between the two sizes: fixed costs cancel out
            ratios["big_ours_marginal_cpu_us_per_result"] = _slope(
                [med("big", "ours", n, "driver_cpu_s") for n in (lo, hi)],
                [med("big", "ours", n, "results") for n in (lo, hi)],
                1e6,
            )
            ratios["big_ours_marginal_rss_kib_per_trial"] = _slope(
                [med("big", "ours", n, "rss_end_mib") for n in (lo, hi)], [lo, hi], 1024
            )
        ratios["big_rss_ours_over_tune"] = ratio(
            med("big", "ours", hi, "rss_growth_per_trial_kib"),
            med("big", "tune", hi, "rss_growth_per_trial_kib"),
        )
    return {"rows": rows, "ratios": ratios}


def _slope(ys: list[float | None], xs: list[float | None], scale: float) -> float | None:
    """(ys[1] - ys[0]) / (xs[1] - xs[0]) x scale, if all are known and xs differ."""
    y0, y1 = ys
    x0, x1 = xs
    if y0 is None or y1 is None or x0 is None or x1 is None or x0 == x1:
        return None
    return (y1 - y0) / (x1 - x0) * scale


def print_report(summary: dict[str, Any], repeat: int) -> None:
    rows = summary["rows"]
    print(f"\nmedians [min-max] of {repeat} run(s); seconds unless marked")
    print("\nshort trials (N x 20 steps of 10 ms, 4 at once); overhead = time - ideal")
    head = (
        f"{'system':<9} {'trials':>6} {'e2e':>18} {'ray up':>15} {'after ray up':>18} "
        f"{'ideal':>6} {'overhead incl. ray':>20} {'overhead excl. ray':>20} {'max run':>8}"
    )
    print(head + "\n" + "-" * len(head))
    for row in (r for r in rows.values() if r["spec"]["workload"] == "short"):
        spec = row["spec"]
        ideal = spec["trials"] * spec["steps"] * spec["step_s"] / spec["concurrency"]
        print(
            f"{LABELS[spec['system']]:<9} {spec['trials']:>6} {fmt_spread(row['e2e_s']):>18} "
            f"{fmt_spread(row['ray_up_s']):>15} {fmt_spread(row['after_ray_s']):>18} "
            f"{ideal:>6.1f} {fmt_spread(row['overhead_s']):>20} "
            f"{fmt_spread(row['overhead_after_ray_s']):>20} "
            f"{fmt_spread(row['max_running'], '.0f'):>8}{'' if row['ok'] else '  FAILED'}"
        )
    print("\nbig sweep (N x 10 trivial steps, 20 at once): the driver process, after Ray's start")
    head = (
        f"{'system':<9} {'trials':>6} {'e2e':>20} {'CPU us/result':>22} "
        f"{'RSS growth KiB/trial':>22} {'steal s':>16}"
    )
    print(head + "\n" + "-" * len(head))
    for row in (r for r in rows.values() if r["spec"]["workload"] == "big"):
        spec = row["spec"]
        print(
            f"{LABELS[spec['system']]:<9} {spec['trials']:>6} {fmt_spread(row['e2e_s']):>20} "
            f"{fmt_spread(row['driver_cpu_us_per_result'], '.0f'):>22} "
            f"{fmt_spread(row['rss_growth_per_trial_kib'], '.1f'):>22} "
            f"{fmt_spread(row['steal_s']):>16}{'' if row['ok'] else '  FAILED'}"
        )
    r = summary["ratios"]
    print("\nratios of medians")
    for key, (what, ok, target) in VERDICTS.items():
        if key in r:
            print(f"{what:<52} {verdict(r[key], ok, target)}")
    for key, what in (
        ("big_ours_marginal_cpu_us_per_result", "big: ours' CPU us per extra result (slope)"),
        ("big_ours_marginal_rss_kib_per_trial", "big: ours' RSS KiB per extra trial (slope)"),
    ):
        if r.get(key) is not None:
            print(f"{what:<52} {r[key]:.1f}")
    if r.get("big_rss_ours_over_tune") is not None:
        print(f"{'big: RSS growth per trial, ours / Tune':<52} {r['big_rss_ours_over_tune']:.2f}")


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    plan = _plan(args)
    runner = Runner(
        args.cooldown, args.rest_ratio, args.timeout, sum(len(s) for _, s in plan) * args.repeat
    )
    runs: list[dict[str, Any]] = []
    print(f"load average before the benchmark: {os.getloadavg()}", flush=True)
    for _workload, specs in plan:
        for attempt in range(args.repeat):
            # Interleave the systems so a noisy spell does not hit one system's runs only.
            for spec in specs if attempt % 2 == 0 else list(reversed(specs)):
                spec = {**spec, "seed": attempt}
                system = LABELS[spec["system"]]
                label = f"{spec['workload']} {system} {spec['trials']} trials (run {attempt + 1})"
                runs.append(runner.run("_sweep_child", spec, label))
                write_figures(args.out, "sweep", vars(args), summarize(runs), runs)
    summary = summarize(runs)
    print_report(summary, args.repeat)
    write_figures(args.out, "sweep", vars(args), summary, runs)
    print(f"\nfigures written to {args.out}")
    return 0 if all(r.get("ok") for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
