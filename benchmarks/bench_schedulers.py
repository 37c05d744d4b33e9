"""Schedulers: trialflow's ASHA and PBT against Ray Tune's own, side by side.

Same trainable dynamics (``_sched_common``), configs, seeds and concurrency for both
(ASHA: 4 trials at once, 0.5 CPU each; PBT: 8 at once, 0.25 CPU each); each run in a
fresh child process with its own ``ray.init(num_cpus=2)``, the systems interleaved
across repeats, a rest before each.

* ``asha``: 64 trials on known learning curves (``plateau * (1 - exp(-rate * t))``,
  mode max; the same 64 ``(rate, plateau)`` pairs, drawn from ``--seed`` in this
  process, for both), 5 ms steps, ``max_t=81, grace_period=1, reduction_factor=3``,
  ``result_buffer`` at its default (issue 27's workload: most trials stop at the first
  rung, so what a trial costs besides its steps sets the wall time). Figures: the
  iterations consumed (the sum of every trial's last ``training_iteration``), the
  trials ending on a rung (1, 3, 9, 27, 81: an exact ASHA ends every one there), the
  ideal (the steps' own time over the concurrency: the limit once Ray is up), wall
  time, and the *true rank* of the trial each system reports best (its true value at
  ``max_t`` among the 64; 1 is the truly best).
* ``pbt``: Ray's ``tune/examples/pbt_example.py`` toy problem, 8 trials x 200
  iterations, ``perturbation_interval=20``, ``lr`` and ``some_other_factor`` mutated as
  there, a checkpoint every 20 iterations; ours keeps 1 checkpoint a trial, Tune its
  default (all). Figures: the best final ``mean_accuracy``, wall time, exploits.
* ``latency`` (from the PBT runs): for each exploit, the time from the exploited trial's
  last result before it (the one PBT decided on) to its first result after it, with
  ``reset_config`` (``pbt``) and without (``pbt-noreset``: a new actor per exploit; Tune
  then with ``reuse_actors=False``).

Targets: the same or a better score (ASHA: true rank, PBT: best accuracy; medians) in
at most half Tune's wall time (ASHA: with the same exactness and no more steps); ours'
exploit latency with ``reset_config`` under a third of Tune's.

Usage::

    python -m benchmarks.bench_schedulers                # everything, 3 repeats
    python -m benchmarks.bench_schedulers --quick        # 32 ASHA trials, PBT 8 x 60
    python -m benchmarks.bench_schedulers --only pbt --repeat 5

Figures go to stdout and to ``benchmarks/out/schedulers.json`` (after every run).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._sched_common import asha_curves
from ._shared import write_figures
from ._sweep_common import OUT_DIR, Runner, fmt, fmt_spread, ratio, spread, verdict

LABELS = {"ours": "ours", "tune": "Ray Tune"}
#: Issue 27's ASHA workload: many short trials, most stopped at the first rung, so the
#: per-trial overhead (start, stop, hand-over of the process) sets the wall time.
ASHA_SHAPE = {"concurrency": 4, "cpu": 0.5, "step_s": 0.005}
WALL_TARGET, LATENCY_TARGET = 0.5, 1 / 3
ROW_FIELDS = {
    "asha": (
        "iterations",
        "best_true_rank",
        "trials_at_max_t",
        "trials_on_rung",
        "ideal_s",
        "e2e_s",
        "after_ray_s",
    ),
    "pbt": (
        "best_accuracy",
        "exploits",
        "rollback_exploits",
        "own_checkpoint_loads",
        "checkpoints_kept",
        "errors",
        "latency_s",
        "start_spread_s",
        "all_running_s",
        "e2e_s",
        "after_ray_s",
    ),
}
COMMON_FIELDS = ("ray_up_s", "steal_s", "load_before")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_schedulers", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per system (medians)")
    parser.add_argument("--quick", action="store_true", help="32 ASHA trials; PBT 8 x 60")
    parser.add_argument("--only", choices=("asha", "pbt", "latency"), default=None)
    parser.add_argument("--systems", default="ours,tune", help="subset of ours,tune")
    parser.add_argument("--seed", type=int, default=0, help="seed of the 64 ASHA curves")
    parser.add_argument(
        "--pbt-step-ms",
        type=float,
        default=0.0,
        help="sleep in each PBT step (default 0: trivial steps, as in Ray's example)",
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    parser.add_argument("--cooldown", type=float, default=15.0, help="rest before each run, s")
    parser.add_argument(
        "--rest-ratio", type=float, default=0.5, help="rest >= this x the previous run's length"
    )
    parser.add_argument("--out", type=Path, default=OUT_DIR / "schedulers.json")
    args = parser.parse_args(argv)
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if set(args.systems) - set(LABELS) or not args.systems:
        parser.error("--systems: choose from ours,tune")
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    return args


def _plan(args: argparse.Namespace) -> list[tuple[str, list[dict[str, Any]]]]:
    """(workload, the specs of one round); a round runs once per repeat."""
    common = {"concurrency": 8, "cpu": 0.25}
    plan = []
    if args.only in (None, "asha"):
        curves = asha_curves(32 if args.quick else 64, args.seed)
        base = {**ASHA_SHAPE, "workload": "asha", "curves": curves}
        plan.append(("asha", [{**base, "system": s} for s in args.systems]))
    pbt = {**common, "workload": "pbt", "trials": 8, "interval": 20}
    pbt["step_s"] = args.pbt_step_ms / 1000
    pbt["iterations"] = 60 if args.quick else 200
    if args.only in (None, "pbt", "latency"):
        plan.append(("pbt", [{**pbt, "system": s, "reset": True} for s in args.systems]))
    if args.only in (None, "latency"):
        plan.append(("pbt-noreset", [{**pbt, "system": s, "reset": False} for s in args.systems]))
    return plan


def _name(spec: dict[str, Any]) -> str:
    if spec["workload"] == "pbt" and not spec["reset"]:
        return "pbt-noreset"
    return str(spec["workload"])


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Spreads per (workload, system); the pooled exploit latencies; the ratios."""
    rows: dict[str, dict[str, Any]] = {}
    for run in runs:
        key = f"{_name(run['spec'])}/{run['spec']['system']}"
        rows.setdefault(key, {"workload": _name(run["spec"]), "runs": []})["runs"].append(run)
    for key, row in rows.items():
        mine = row.pop("runs")
        row["system"] = key.split("/")[1]
        row["n"], row["ok"] = len(mine), all(r.get("ok") for r in mine)
        fields = ROW_FIELDS["asha" if row["workload"] == "asha" else "pbt"] + COMMON_FIELDS
        row.update({f: spread([r.get(f) for r in mine]) for f in fields})
        spec = mine[0]["spec"]
        row["trials"] = len(spec["curves"]) if row["workload"] == "asha" else spec["trials"]
        row["iterations_each"] = spec.get("iterations")
        for part in ("latency", "to_load", "config_to_load"):
            latencies = [e for r in mine for e in r.get("latencies", [])]
            pooled = [e[f"{part}_s"] for e in latencies if e.get(f"{part}_s") is not None]
            row[f"{part}_pooled"] = _percentiles(pooled)

    def med(key: str, field: str) -> float | None:
        row = rows.get(key)
        if row is None:
            return None
        value = row["latency_pooled"] if field == "latency_pooled" else row[field]
        median: float | None = value["median"]
        return median

    ratios: dict[str, float | None] = {}
    for w in ("asha", "pbt"):
        for field in ("e2e_s", "after_ray_s"):
            ratios[f"{w}_{field}_ours_over_tune"] = ratio(
                med(f"{w}/ours", field), med(f"{w}/tune", field)
            )
    ratios["asha_iterations_ours_over_tune"] = ratio(
        med("asha/ours", "iterations"), med("asha/tune", "iterations")
    )
    ratios["asha_after_ray_s_ours_over_ideal"] = ratio(
        med("asha/ours", "after_ray_s"), med("asha/ours", "ideal_s")
    )
    rank_ours, rank_tune = med("asha/ours", "best_true_rank"), med("asha/tune", "best_true_rank")
    ratios["asha_rank_ours_minus_tune"] = (
        rank_ours - rank_tune if rank_ours is not None and rank_tune is not None else None
    )
    ratios["pbt_accuracy_ours_over_tune"] = ratio(
        med("pbt/ours", "best_accuracy"), med("pbt/tune", "best_accuracy")
    )
    for w in ("pbt", "pbt-noreset"):
        ratios[f"{w}_latency_ours_over_tune"] = ratio(
            med(f"{w}/ours", "latency_pooled"), med(f"{w}/tune", "latency_pooled")
        )
    return {"rows": rows, "ratios": ratios}


def _percentiles(values: list[float]) -> dict[str, float | None]:
    """Median and 10th/90th percentiles (nearest rank) of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return {"median": None, "p10": None, "p90": None, "n": 0}

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"median": spread(ordered)["median"], "p10": at(0.1), "p90": at(0.9), "n": len(ordered)}


#: ratio key -> (what it is, the target's test, the target as shown).
VERDICTS: dict[str, tuple[str, Callable[[float], bool], str]] = {
    "asha_rank_ours_minus_tune": (
        "asha: true rank of best found, ours - Tune",
        lambda v: v <= 0,
        "<= 0",
    ),
    "asha_iterations_ours_over_tune": (
        "asha: steps run, ours / Tune",
        lambda v: v <= 1,
        "<= 1",
    ),
    "asha_e2e_s_ours_over_tune": (
        "asha: wall incl. Ray start, ours / Tune",
        lambda v: v <= WALL_TARGET,
        "<= 0.5",
    ),
    "asha_after_ray_s_ours_over_tune": (
        "asha: wall excl. Ray start, ours / Tune",
        lambda v: v <= WALL_TARGET,
        "<= 0.5",
    ),
    "pbt_accuracy_ours_over_tune": (
        "pbt: best mean_accuracy, ours / Tune",
        lambda v: v >= 1,
        ">= 1",
    ),
    "pbt_e2e_s_ours_over_tune": (
        "pbt: wall incl. Ray start, ours / Tune",
        lambda v: v <= WALL_TARGET,
        "<= 0.5",
    ),
    "pbt_after_ray_s_ours_over_tune": (
        "pbt: wall excl. Ray start, ours / Tune",
        lambda v: v <= WALL_TARGET,
        "<= 0.5",
    ),
    "pbt_latency_ours_over_tune": (
        "latency: exploit with reset_config, ours / Tune",
        lambda v: v <= LATENCY_TARGET,
        "<= 0.33",
    ),
}


def print_report(summary: dict[str, Any], repeat: int) -> None:
    rows = summary["rows"]
    print(f"\nmedians [min-max] of {repeat} run(s); seconds unless marked")
    asha = [r for r in rows.values() if r["workload"] == "asha"]
    pbt = [r for r in rows.values() if r["workload"] != "asha"]
    if asha:
        print(
            f"\nASHA ({asha[0]['trials']} trials, max_t 81, grace 1, rf 3; "
            f"{ASHA_SHAPE['concurrency']} at once, {ASHA_SHAPE['step_s'] * 1e3:.0f} ms steps); "
            "rank 1 = the truly best trial; on rung = trials ending on a rung (exact: all); "
            "ideal = the steps' own time / concurrency"
        )
    head = (
        f"{'system':<9} {'iterations':>16} {'true rank':>12} {'at max_t':>9} {'on rung':>9} "
        f"{'ideal':>14} {'e2e':>17} {'after Ray up':>17} {'Ray up':>14}"
    )
    print(head + "\n" + "-" * len(head))
    for row in asha:
        print(
            f"{LABELS[row['system']]:<9} {fmt_spread(row['iterations'], '.0f'):>16} "
            f"{fmt_spread(row['best_true_rank'], '.0f'):>12} "
            f"{fmt_spread(row['trials_at_max_t'], '.0f'):>9} "
            f"{fmt_spread(row['trials_on_rung'], '.0f'):>9} {fmt_spread(row['ideal_s']):>14} "
            f"{fmt_spread(row['e2e_s']):>17} {fmt_spread(row['after_ray_s']):>17} "
            f"{fmt_spread(row['ray_up_s']):>14}{'' if row['ok'] else '  FAILED'}"
        )
    if pbt:
        print(
            f"\nPBT ({pbt[0]['trials']} x {pbt[0]['iterations_each']}, interval 20); exploit "
            "latency: pooled over every exploit, median [p10-p90]; to load: its part up to "
            "load_checkpoint, fetch: from reset_config/setup to load_checkpoint; back = "
            "exploits rolling the trial back; own = restores from the trial's own checkpoint"
        )
    head = (
        f"{'variant':<12} {'system':<9} {'best accuracy':>20} {'exploits':>10} {'back':>6} "
        f"{'own':>6} "
        f"{'ckpts kept':>11} {'start spread':>14} {'e2e':>17} {'after Ray up':>17} "
        f"{'exploit latency':>22} {'to load':>8} {'fetch':>7}"
    )
    print(head + "\n" + "-" * len(head))
    for row in pbt:
        lat = row["latency_pooled"]
        shown = "-"
        if lat["median"] is not None:
            shown = f"{lat['median']:.3f} [{lat['p10']:.3f}-{lat['p90']:.3f}]"
        print(
            f"{row['workload']:<12} {LABELS[row['system']]:<9} "
            f"{fmt_spread(row['best_accuracy']):>20} {fmt_spread(row['exploits'], '.0f'):>10} "
            f"{fmt_spread(row['rollback_exploits'], '.0f'):>6} "
            f"{fmt_spread(row['own_checkpoint_loads'], '.0f'):>6} "
            f"{fmt_spread(row['checkpoints_kept'], '.0f'):>11} "
            f"{fmt_spread(row['start_spread_s']):>14} {fmt_spread(row['e2e_s']):>17} "
            f"{fmt_spread(row['after_ray_s']):>17} {shown:>22} "
            f"{fmt(row['to_load_pooled']['median'], '.3f'):>8} "
            f"{fmt(row['config_to_load_pooled']['median'], '.3f'):>7}"
            f"{'' if row['ok'] else '  FAILED'}"
        )
    r = summary["ratios"]
    print("\nratios of medians")
    present = {row["workload"] for row in rows.values()}
    for key, (what, ok, target) in VERDICTS.items():
        if key.split("_")[0] in present:
            print(f"{what:<50} {verdict(r[key], ok, target)}")
    value = r.get("asha_after_ray_s_ours_over_ideal")
    if value is not None:
        print(f"{'asha: ours excl. Ray start / ideal (limit 1)':<50} {value:.2f}")
    value = r.get("pbt-noreset_latency_ours_over_tune")
    if value is not None:
        print(f"{'latency: exploit without reset_config, ours / Tune':<50} {value:.2f}")


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    plan = _plan(args)
    total = sum(len(specs) for _, specs in plan) * args.repeat
    runner = Runner(args.cooldown, args.rest_ratio, args.timeout, total)
    runs: list[dict[str, Any]] = []
    print(f"load average before the benchmark: {os.getloadavg()}", flush=True)
    for workload, specs in plan:
        for attempt in range(args.repeat):
            # Interleave the systems so a noisy spell does not hit one system's runs only.
            for spec in specs if attempt % 2 == 0 else list(reversed(specs)):
                spec = {**spec, "seed": attempt}
                label = f"{workload} {LABELS[spec['system']]} (run {attempt + 1})"
                runs.append(runner.run("_sched_child", spec, label))
                write_figures(args.out, "schedulers", vars(args), summarize(runs), runs)
    summary = summarize(runs)
    print_report(summary, args.repeat)
    write_figures(args.out, "schedulers", vars(args), summary, runs)
    print(f"\nfigures written to {args.out}")
    return 0 if all(r.get("ok") for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
