"""Distributed trials: a sweep of Ray Train runs on trialflow and on Ray Tune, side by side.

The same sweep on both: ``--trials`` (4) trials, a grid of learning rates, each a
function trainable that drives a ``TorchTrainer`` of ``--workers`` (2) workers of
``--worker-cpu`` (0.95) CPU (gloo on CPU, a small MLP on synthetic data made in the
workers, ``--steps`` batches an epoch, ``--epochs`` (4) epochs, rank 0 checkpointing
every epoch, an all-reduce checked), FIFO or ASHA, at most ``--concurrency`` trials at
once (default: the gangs 2 CPUs hold). Ours: ``Orchestrator.sweep`` with
``orchestrator.integrations.ray_train.TrialReportCallback``; Tune's: Ray 2.60's
documented pattern (``tune.Tuner`` of a function that builds the trainer with
``ray.tune.integration.ray_train.TuneReportCallback``). The trial's own function asks
for no CPU on ours and 0.01 CPU on Tune's (it refuses none; see ``_train_tune``): the
workers' 0.95 CPU leaves room for it.

Each run is a fresh child process with its own ``ray.init(num_cpus=2)``; the systems
alternate across repeats and the machine rests (and settles) before each run. Figures
(medians [min-max] over the repeats; per run, medians over its trials):

* ``sweep``: the sweep's wall time once Ray is up (target: ours <= 0.7x Tune's);
  ``e2e``: with Ray's start;
* ``placed->first``: rank 0's train loop starting (the gang placed, its process group
  set up: see ``_train_common``) to the trial's first result at the driver (target: ours
  no more than Tune's, which is Train's own report path);
* ``report->driver``: rank 0's first ``ray.train.report`` call to its arrival;
* ``start->placed``: the trial started (driver) to rank 0's loop start, of which
  ``start->fn`` to the trial's function calling ``fit`` (the trial's actor) and
  ``fn->placed`` the rest (Train's controller, worker group and process group);
* ``gap``: a trial's last result to the next trial's start (one gang after another);
* with ``--profile``, Train's start split by a probe callback in its controller
  (``_train_stamps``, on both): the function building the trainer -> the controller
  started -> its worker group starting -> started (gang placed, workers up); ``fit``:
  the function building the trainer -> the controller finished; and the CPU seconds
  of the sweep (Ray up to the end) by kind of process (each Ray worker by its actor's
  class), which other users' load does not inflate as it does wall time.

Usage::

    python -m benchmarks.bench_train                  # 4 trials x 4 epochs, 3 repeats
    python -m benchmarks.bench_train --quick          # 2 trials x 2 epochs, once
    python -m benchmarks.bench_train --scheduler asha --trials 8

Figures go to stdout and to ``benchmarks/out/train.json`` (after every run).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._core_common import NUM_CPUS
from ._shared import write_figures
from ._sweep_common import OUT_DIR, Runner, fmt_spread, ratio, spread, verdict
from ._train_common import LEARNING_RATES

SYSTEMS = ("ours", "tune")
LABELS = {"ours": "ours", "tune": "Ray Tune"}
#: ratio key -> (what it is, the target's test, the target as shown).
VERDICTS: dict[str, tuple[str, Callable[[float], bool], str]] = {
    "sweep_s": ("sweep wall time (Ray up), ours / Tune", lambda v: v <= 0.7, "<= 0.7"),
    "placed_to_first_s": (
        "gang placed -> first result, ours / Tune",
        lambda v: v <= 1.0,
        "<= 1.0",
    ),
}
FIELDS = (
    "sweep_s",
    "e2e_s",
    "ray_up_s",
    "placed_to_first_s",
    "report_to_driver_s",
    "start_to_placed_s",
    "start_to_fn_s",
    "fn_to_placed_s",
    "last_to_next_start_s",
    "fn_to_controller_s",
    "controller_to_group_s",
    "group_start_s",
    "fit_s",
    "results",
    "checkpoints",
    "load_before",
    "steal_s",
)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_train", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--repeat", type=int, default=None, help="runs per system (3; quick 1)")
    parser.add_argument("--quick", action="store_true", help="2 trials x 2 epochs, once")
    parser.add_argument("--trials", type=int, default=None, help="trials a sweep (4; quick 2)")
    parser.add_argument("--epochs", type=int, default=None, help="epochs a trial (4; quick 2)")
    parser.add_argument("--steps", type=int, default=20, help="batches an epoch")
    parser.add_argument("--workers", type=int, default=2, help="Train workers a trial")
    parser.add_argument(
        "--worker-cpu",
        type=float,
        default=0.95,
        help="CPUs a worker (0.95: Tune's trial needs some)",
    )
    parser.add_argument("--concurrency", type=int, default=None, help="default: gangs 2 CPUs hold")
    parser.add_argument("--scheduler", choices=("fifo", "asha"), default="fifo")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also where Train's start and the CPU go (_train_stamps)",
    )
    parser.add_argument("--systems", default="ours,tune", help=f"subset of {SYSTEMS}")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    parser.add_argument("--cooldown", type=float, default=10.0, help="rest before each run, s")
    parser.add_argument(
        "--rest-ratio", type=float, default=0.25, help="rest >= this x the previous run's length"
    )
    parser.add_argument("--out", type=Path, default=OUT_DIR / "train.json")
    args = parser.parse_args(argv)
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if set(args.systems) - set(SYSTEMS) or not args.systems:
        parser.error(f"--systems: choose from {SYSTEMS}")
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.trials = args.trials or (2 if args.quick else 4)
    args.epochs = args.epochs or (2 if args.quick else 4)
    if not 1 <= args.trials <= len(LEARNING_RATES):
        parser.error(f"--trials: 1 to {len(LEARNING_RATES)}")
    # Tune's trial function holds 0.01 CPU beside its gang (it refuses 0; ours asks 0).
    gang = args.workers * args.worker_cpu + 0.01
    if gang > NUM_CPUS:
        parser.error(f"a gang of {gang:g} CPUs (with Tune's trial) does not fit in {NUM_CPUS}")
    args.concurrency = args.concurrency or max(1, math.floor(NUM_CPUS / gang + 1e-9))
    return args


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Spreads per system, and the ratios of their medians."""
    rows: dict[str, dict[str, Any]] = {}
    for system in SYSTEMS:
        mine = [r for r in runs if r["spec"]["system"] == system]
        if mine:
            rows[system] = {"n": len(mine), "ok": all(r.get("ok") for r in mine)}
            rows[system].update({f: spread([r.get(f) for r in mine]) for f in FIELDS})
            kinds = sorted({k for r in mine for k in (r.get("cpu_s") or {})})
            rows[system]["cpu_s"] = {
                k: spread([(r.get("cpu_s") or {}).get(k) for r in mine]) for k in kinds
            }
    ratios: dict[str, float | None] = {}
    if "ours" in rows and "tune" in rows:
        for field in ("sweep_s", "e2e_s", "placed_to_first_s", "report_to_driver_s"):
            ratios[field] = ratio(rows["ours"][field]["median"], rows["tune"][field]["median"])
    return {"rows": rows, "ratios": ratios}


def print_report(summary: dict[str, Any], args: argparse.Namespace) -> None:
    print(
        f"\n{args.trials} trials x {args.workers} workers ({args.worker_cpu:g} CPU each), "
        f"{args.epochs} epochs of {args.steps} batches, {args.scheduler}, "
        f"{args.concurrency} at once; medians [min-max] of {args.repeat} run(s), seconds"
    )
    head = (
        f"{'system':<9} {'sweep':>17} {'e2e':>17} {'placed->first':>17} "
        f"{'report->driver':>15} {'start->placed':>17} {'start->fn':>15} "
        f"{'fn->placed':>17} {'gap':>15} {'load':>15}"
    )
    print(head + "\n" + "-" * len(head))
    for system, row in summary["rows"].items():
        print(
            f"{LABELS[system]:<9} {fmt_spread(row['sweep_s']):>17} {fmt_spread(row['e2e_s']):>17} "
            f"{fmt_spread(row['placed_to_first_s'], '.2f'):>17} "
            f"{fmt_spread(row['report_to_driver_s'], '.2f'):>15} "
            f"{fmt_spread(row['start_to_placed_s']):>17} "
            f"{fmt_spread(row['start_to_fn_s'], '.2f'):>15} "
            f"{fmt_spread(row['fn_to_placed_s']):>17} "
            f"{fmt_spread(row['last_to_next_start_s']):>15} "
            f"{fmt_spread(row['load_before']):>15}{'' if row['ok'] else '  FAILED'}"
        )
    if args.profile:
        print("\nRay Train's start (stamps in its controller; medians over a run's trials)")
        head = (
            f"{'system':<9} {'fn->controller':>17} {'controller->group':>18} "
            f"{'group start':>17} {'fit':>17}"
        )
        print(head + "\n" + "-" * len(head))
        for system, row in summary["rows"].items():
            print(
                f"{LABELS[system]:<9} {fmt_spread(row['fn_to_controller_s']):>17} "
                f"{fmt_spread(row['controller_to_group_s']):>18} "
                f"{fmt_spread(row['group_start_s']):>17} {fmt_spread(row['fit_s']):>17}"
            )
        print("\nCPU seconds of the sweep by process (medians [min-max])")
        for system, row in summary["rows"].items():
            cpu = ", ".join(
                f"{kind.removeprefix('ray::')} {fmt_spread(value)}"
                for kind, value in row["cpu_s"].items()
                if kind != "workers_n"
            )
            print(f"{LABELS[system]:<9} {cpu}")
    ratios = summary["ratios"]
    if ratios:
        print("\nratios of medians")
        for key, (what, ok, target) in VERDICTS.items():
            print(f"{what:<44} {verdict(ratios.get(key), ok, target)}")
        for key, what in (
            ("e2e_s", "e2e (Ray's start included), ours / Tune"),
            ("report_to_driver_s", "report -> driver, ours / Tune"),
        ):
            if ratios.get(key) is not None:
                print(f"{what:<44} {ratios[key]:.2f}")


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    spec = {
        k: getattr(args, k)
        for k in (
            "trials",
            "epochs",
            "steps",
            "workers",
            "worker_cpu",
            "concurrency",
            "scheduler",
            "profile",
        )
    }
    runner = Runner(args.cooldown, args.rest_ratio, args.timeout, len(args.systems) * args.repeat)
    runs: list[dict[str, Any]] = []
    print(f"load average before the benchmark: {os.getloadavg()}", flush=True)
    for attempt in range(args.repeat):
        # Alternate the systems so a noisy spell does not hit one system's runs only.
        for system in args.systems if attempt % 2 == 0 else list(reversed(args.systems)):
            label = f"{LABELS[system]} (run {attempt + 1})"
            runs.append(runner.run("_train_child", {**spec, "system": system}, label))
            write_figures(args.out, "train", vars(args), summarize(runs), runs)
    summary = summarize(runs)
    print_report(summary, args)
    write_figures(args.out, "train", vars(args), summary, runs)
    print(f"\nfigures written to {args.out}")
    return 0 if all(r.get("ok") for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
