"""Core throughput: trialflow's orchestrator against Ray Tune and a bare asyncio loop.

The same workloads (N trials x S trivial steps, a checkpoint every 50 steps keeping 2,
0.1 CPU per trial) run under

* ``tune``: Ray Tune (class API, ``Tuner``, ``RunConfig`` stop and ``CheckpointConfig``),
* ``ours``: the orchestrator as shipped (adaptive result buffering, its default per-trial
  logs: JSON, CSV and TensorBoard, and its progress display),
* ``ours-quiet``: the same without logs and progress (``loggers=[]``,
  ``progress=False``),
* ``ours-dash``: ``ours`` with the dashboard open on the experiment (its server and a
  page holding the live stream, see ``_core_dashboard``),
* ``ours-buf``: the orchestrator with ``result_buffer`` (default 10) steps per call,
* ``ours-pack``: the orchestrator with ``trials_per_worker`` (default 10): the 20 trials
  share 2 worker processes instead of starting 20, one step per call,
* ``ours-hook``, ``ours-hook-sync``: ``ours`` plus a trivial user hook whose
  ``on_trial_result`` counts results (``async def``, or a plain method, run in the hook
  thread pool): a user's result hook paces its trial (it never trains more than two
  calls past what the hook has seen), and this is what that costs,
* ``raw``: one coroutine per trial awaiting ``actor.step.remote()``, no framework,
* ``ours-fn``: the orchestrator with a *function* trainable (``def trivial(config)``
  calling ``report(metrics)``, and ``report(metrics, checkpoint=d)`` with the state
  file in a temporary directory every 50 steps; ``get_checkpoint()`` at start),
  otherwise as ``ours``,
* ``tune-fn``: Ray Tune's function API, the same function with ``tune.report`` and
  ``tune.Checkpoint.from_directory`` (``CheckpointConfig(num_to_keep=...)``: a function
  checkpoints when it reports one), otherwise as ``tune``,

each run in a fresh subprocess with its own ``ray.init(num_cpus=2)``. Three rates per run:

* end to end: results / wall time from before Ray starts to the end of ``run()`` /
  ``Tuner.fit()`` / the last raw call (Ray shutdown excluded, reported as ``exit``);
* steady state: results per second while every trial is running (from the last
  trial's first result to the first trial's last result), by the actors' own result
  timestamps. ``-`` when start-up is so slow that no such window exists.
* active: results / (last result - first result), Ray start-up left out; defined even
  when the steady window is not.

CPU seconds by process (driver, workers, raylet, GCS, other) are sampled during each
run and shown per result: on a busy machine they move far less than wall-clock rates.

Ratios (of medians): for ``ours``, ``ours-buf`` and ``ours-pack``, the end-to-end rate
over Tune's (targets by workload) and the steady rate over the raw loop's (>= 90 %);
``ours`` over ``ours-quiet`` (>= 90 %); ``ours-hook`` over ``ours`` (>= 90 %, issue 24;
``ours-hook-sync`` for information); ``ours-dash`` over ``ours`` (>= 95 %: watching
costs the run nothing measurable); ``ours-fn``'s end-to-end rate over
``tune-fn``'s (function API against function API, target >= 4x) and over ``ours``'s
(the price of a function trainable against a class, target >= 85 %), with its steady
and active rates over ``ours``'s for information.

Usage::

    python -m benchmarks.bench_core                 # 20x1000 and 20x200, once each
    python -m benchmarks.bench_core --repeat 3      # medians of 3
    python -m benchmarks.bench_core --quick         # 20x100 and 20x60: a sanity run
    python -m benchmarks.bench_core --systems ours,ours-fn,tune,tune-fn   # function API
    python -m benchmarks.bench_core --hook --steps 1000 --repeat 3   # a user's result hook

Figures go to stdout and to ``benchmarks/out/core.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ._core_common import RunSpec, median, parse_child_output, settle, steal_seconds
from ._shared import write_figures

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "out" / "core.json"

SYSTEMS = (
    "tune",
    "ours",
    "ours-quiet",
    "ours-hook",
    "ours-hook-sync",
    "ours-dash",
    "ours-buf",
    "ours-pack",
    "raw",
    "tune-fn",
    "ours-fn",
    "baseline",
    "baseline-fn",
)
LABELS = {
    "tune": "Ray Tune",
    "ours": "ours",
    "ours-quiet": "ours, no logs/progress",
    "ours-hook": "ours + result hook",
    "ours-hook-sync": "ours + sync hook",
    "ours-dash": "ours, dashboard open",
    "baseline": "ours, --baseline",
    "baseline-fn": "ours, function, --baseline",
    "ours-buf": "ours (buffer={buffer})",
    "ours-pack": "ours (pack={pack})",
    "raw": "raw asyncio loop",
    "tune-fn": "Ray Tune, function",
    "ours-fn": "ours, function",
}

#: The issue's targets, by steps per trial: ours / Tune end to end.
E2E_TARGETS = {1000: 4.0, 200: 3.5}
#: ours / raw loop, steady state.
STEADY_TARGET = 0.90
#: ours with its default loggers and progress / ours without, end to end.
LOGGING_TARGET = 0.90
#: ours with a trivial user result hook / ours without, end to end (issue 24).
HOOK_TARGET = 0.90
#: The systems with a user result hook, and which kind (``RunSpec.result_hook``).
HOOK_SYSTEMS = {"ours-hook": "async", "ours-hook-sync": "sync"}
#: ours with the dashboard open / ours, end to end: within 5 %.
DASHBOARD_TARGET = 0.95
#: ours with a function trainable / Ray Tune's function API, end to end (every workload).
FUNCTION_VS_TUNE_TARGET = 4.0
#: ours with a function trainable / ours with the class, end to end: within 15 %.
FUNCTION_VS_CLASS_TARGET = 0.85
#: The function systems (``RunSpec.function``).
FUNCTION_SYSTEMS = ("ours-fn", "tune-fn", "baseline-fn")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_core", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per system (medians)")
    parser.add_argument("--quick", action="store_true", help="short workloads: 100 and 60 steps")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument(
        "--steps", default=None, help="comma-separated steps per trial, one workload each"
    )
    parser.add_argument("--checkpoint-every", type=int, default=50)
    parser.add_argument("--keep", type=int, default=2)
    parser.add_argument("--cpu", type=float, default=0.1, help="CPUs per trial")
    parser.add_argument("--buffer", type=int, default=10, help="result_buffer for ours-buf")
    parser.add_argument("--pack", type=int, default=10, help="trials_per_worker for ours-pack")
    parser.add_argument(
        "--systems", default=",".join(SYSTEMS), help=f"comma-separated subset of {SYSTEMS}"
    )
    parser.add_argument(
        "--hook",
        action="store_true",
        help="only ours with and without a trivial user result hook (ours, ours-hook, "
        "ours-hook-sync): the cost of a hook's pacing",
    )
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    parser.add_argument(
        "--cooldown",
        type=float,
        default=15.0,
        help="seconds of rest before each run (this VM is throttled under sustained load)",
    )
    parser.add_argument(
        "--rest-ratio",
        type=float,
        default=0.5,
        help="rest at least this fraction of the previous run's length before the next: "
        "a long run (Ray Tune's) drains the VM's CPU credit, and whichever system ran "
        "next was throttled for it",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="DIR",
        help="another checkout of this project (e.g. `git worktree add /tmp/before HEAD~5`): "
        "adds the system 'baseline' (and with it listed, 'baseline-fn'), ours as that tree "
        "has it, to compare before and after "
        "in one run",
    )
    parser.add_argument(
        "--report",
        type=Path,
        default=None,
        metavar="JSON",
        help="only print the tables for the runs in this core.json (give the same "
        "--steps/--systems/--buffer it was run with)",
    )
    args = parser.parse_args(argv)
    if args.steps is None:
        args.steps = "100,60" if args.quick else "1000,200"
    if args.hook:
        args.systems = "ours,ours-hook,ours-hook-sync"
    if args.baseline is not None and "baseline" not in args.systems:
        args.systems += ",baseline"
    elif args.baseline is None:
        systems = args.systems.split(",")
        args.systems = ",".join(s for s in systems if not s.strip().startswith("baseline"))
    args.steps = [int(s) for s in str(args.steps).split(",") if s.strip()]
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(args.systems) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown system(s) {sorted(unknown)}; choose from {SYSTEMS}")
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    return args


def _spec(args: argparse.Namespace, system: str, steps: int) -> RunSpec:
    if system.startswith(("ours", "baseline")):
        runner = "ours"
    elif system.startswith("tune"):
        runner = "tune"
    else:
        runner = system
    return RunSpec(
        system=runner,
        trials=args.trials,
        steps=steps,
        checkpoint_every=args.checkpoint_every,
        keep=args.keep,
        cpu=args.cpu,
        result_buffer=args.buffer if system == "ours-buf" else None,
        trials_per_worker=args.pack if system == "ours-pack" else 1,
        quiet=system == "ours-quiet",
        function=system in FUNCTION_SYSTEMS,
        result_hook=HOOK_SYSTEMS.get(system),
        dashboard=system == "ours-dash",
    )


def _child_env(root: Path = ROOT) -> dict[str, str]:
    env = dict(os.environ)
    # Every child starts its own private cluster: the orchestrator by itself (it passes
    # address="local"), Tune and the raw loop by ray.init(address="local"). A
    # RAY_ADDRESS would make the orchestrator join that cluster instead.
    env.pop("RAY_ADDRESS", None)
    env.setdefault("RAY_AUTH_MODE", "disabled")
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    return env


def run_one(
    spec: RunSpec, timeout: float, cooldown: float = 0.0, root: Path = ROOT
) -> dict[str, Any]:
    """Run ``spec`` in a fresh interpreter (and so a fresh Ray) on a quiet machine;
    return its figures."""
    busy = settle(cooldown=cooldown)
    load = os.getloadavg()[0]
    steal0 = steal_seconds()
    fields = asdict(spec)
    if root != ROOT:  # another tree's RunSpec may predate fields left at their defaults
        defaults = asdict(RunSpec(spec.system, 0, 0, 0, 0, 0.0))
        keep = ("system", "trials", "steps", "checkpoint_every", "keep", "cpu")
        fields = {k: v for k, v in fields.items() if k in keep or v != defaults[k]}
    command = [sys.executable, "-m", "benchmarks._core_child", json.dumps(fields)]
    started = time.monotonic()
    try:
        proc = subprocess.run(
            command,
            cwd=root,
            env=_child_env(root),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"spec": asdict(spec), "ok": False, "error": f"timed out after {timeout:.0f} s"}
    figures = parse_child_output(proc.stdout)
    if figures is None:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        return {
            "spec": asdict(spec),
            "ok": False,
            "error": f"exit status {proc.returncode}, no figures; stderr tail:\n{tail}",
        }
    figures["load_before"] = load
    figures["busy_before"] = busy
    figures["steal_s"] = steal_seconds() - steal0
    figures["process_s"] = time.monotonic() - started
    return figures


#: CPU time is reported by kind of process (see ``CpuSampler``), per result.
CPU_KINDS = ("driver", "workers", "persister", "raylet", "gcs", "other")  # "sampler" is left out


def _cpu_per_result(run: dict[str, Any], kind: str) -> float | None:
    cpu, results = run.get("cpu_s"), run.get("results")
    if not cpu or not results or kind not in cpu:
        return None
    per_result: float = float(cpu[kind]) / float(results) * 1e6
    return per_result


def _unit(value: float | None, unit: str) -> str:
    return unit if value is not None else " "


def _fmt(value: float | None, pattern: str) -> str:
    if value is None:
        width = pattern.split(".")[0]
        return "-".rjust(int(width) if width.isdigit() else 0)
    return format(value, pattern)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def summarize_runs(args: argparse.Namespace, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per (workload, system), and the ratios the issue sets targets for."""
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    ratios: dict[str, dict[str, Any]] = {}
    for steps in args.steps:
        key = f"{args.trials}x{steps}"
        rows[key] = {}
        for system in args.systems:
            mine = [r for r in runs if r["system_label"] == system and r["spec"]["steps"] == steps]
            fields = (
                "e2e_rate",
                "steady_rate",
                "active_rate",
                "ray_up_s",
                "all_running_s",
                "e2e_s",
                "exit_s",
                "steal_s",
            )
            row = {f: median([r.get(f) for r in mine]) for f in fields}
            for kind in CPU_KINDS:
                row[f"cpu_us_{kind}"] = median([_cpu_per_result(r, kind) for r in mine])
            row["workers_started"] = median([(r.get("cpu_s") or {}).get("workers_n") for r in mine])
            row["dashboard_us"] = median([_dashboard_us(r) for r in mine])
            row["runs"] = len(mine)
            row["ok"] = bool(mine) and all(r.get("ok") for r in mine)
            rows[key][system] = row
        tune, raw = rows[key].get("tune"), rows[key].get("raw")
        ratios[key] = {}
        base = rows[key].get("baseline")
        quiet = rows[key].get("ours-quiet")
        for system in ("ours", "ours-buf", "ours-pack"):
            ours = rows[key].get(system)
            if ours is None:
                continue
            entry: dict[str, Any] = {}
            if quiet is not None and system == "ours":
                entry["e2e_vs_quiet"] = _ratio(ours["e2e_rate"], quiet["e2e_rate"])
                entry["e2e_vs_quiet_target"] = LOGGING_TARGET
            for hooked in HOOK_SYSTEMS:
                with_hook = rows[key].get(hooked)
                if with_hook is not None and system == "ours":
                    entry[f"{hooked}_e2e"] = _ratio(with_hook["e2e_rate"], ours["e2e_rate"])
                    entry[f"{hooked}_active"] = _ratio(
                        with_hook["active_rate"], ours["active_rate"]
                    )
            dash = rows[key].get("ours-dash")
            if dash is not None and system == "ours":
                entry["dash_cpu_us"] = dash["dashboard_us"]
                entry["dash_vs_closed"] = _ratio(dash["e2e_rate"], ours["e2e_rate"])
                entry["dash_steady_vs_closed"] = _ratio(dash["steady_rate"], ours["steady_rate"])
                entry["dash_active_vs_closed"] = _ratio(dash["active_rate"], ours["active_rate"])
            if base is not None and system == "ours":
                entry["e2e_vs_baseline"] = _ratio(ours["e2e_rate"], base["e2e_rate"])
                entry["steady_vs_baseline"] = _ratio(ours["steady_rate"], base["steady_rate"])
                entry["active_vs_baseline"] = _ratio(ours["active_rate"], base["active_rate"])
            if tune is not None:
                entry["e2e_vs_tune"] = _ratio(ours["e2e_rate"], tune["e2e_rate"])
                entry["e2e_vs_tune_target"] = E2E_TARGETS.get(steps)
                entry["steady_vs_tune"] = _ratio(ours["steady_rate"], tune["steady_rate"])
            if raw is not None:
                entry["steady_vs_raw"] = _ratio(ours["steady_rate"], raw["steady_rate"])
                entry["steady_vs_raw_target"] = STEADY_TARGET
                entry["e2e_vs_raw"] = _ratio(ours["e2e_rate"], raw["e2e_rate"])
            ratios[key][system] = entry
        fn, tune_fn, ours_class = (rows[key].get(s) for s in ("ours-fn", "tune-fn", "ours"))
        if fn is not None and (tune_fn is not None or ours_class is not None):
            entry = {}
            if tune_fn is not None:
                entry["e2e_vs_tune_fn"] = _ratio(fn["e2e_rate"], tune_fn["e2e_rate"])
                entry["e2e_vs_tune_fn_target"] = FUNCTION_VS_TUNE_TARGET
                entry["steady_vs_tune_fn"] = _ratio(fn["steady_rate"], tune_fn["steady_rate"])
            if ours_class is not None:
                entry["e2e_vs_class"] = _ratio(fn["e2e_rate"], ours_class["e2e_rate"])
                entry["e2e_vs_class_target"] = FUNCTION_VS_CLASS_TARGET
                entry["steady_vs_class"] = _ratio(fn["steady_rate"], ours_class["steady_rate"])
                entry["active_vs_class"] = _ratio(fn["active_rate"], ours_class["active_rate"])
            ratios[key]["ours-fn"] = entry
    return {"rows": rows, "ratios": ratios}


def _verdict(value: float | None, target: float | None, shown: str) -> str:
    if value is None or target is None:
        return ""
    return f"  (target >= {shown}: {'met' if value >= target else 'MISSED'})"


def print_report(args: argparse.Namespace, summary: dict[str, Any]) -> None:
    head = (
        f"{'workload':<9} {'system':<20} {'e2e res/s':>10} {'steady res/s':>13} "
        f"{'active res/s':>13} "
        f"{'ray up s':>9} {'all run s':>10} {'e2e s':>8} {'exit s':>7} {'steal s':>8} "
        f"{'runs':>5}"
    )
    print()
    print(
        f"medians of {args.repeat} run(s); e2e includes Ray start; steady = while all trials "
        "run; active = first result to last; steal = CPU seconds the hypervisor took"
    )
    print(head)
    print("-" * len(head))
    for key, systems in summary["rows"].items():
        for system, row in systems.items():
            label = LABELS[system].format(buffer=args.buffer, pack=args.pack)
            flag = "" if row["ok"] else "  FAILED"
            print(
                f"{key:<9} {label:<20} {_fmt(row['e2e_rate'], '10.0f')} "
                f"{_fmt(row['steady_rate'], '13.0f')} {_fmt(row['active_rate'], '13.0f')} "
                f"{_fmt(row['ray_up_s'], '9.1f')} "
                f"{_fmt(row['all_running_s'], '10.1f')} {_fmt(row['e2e_s'], '8.1f')} "
                f"{_fmt(row['exit_s'], '7.1f')} {_fmt(row['steal_s'], '8.1f')} "
                f"{row['runs']:>5}{flag}"
            )
    print()
    print(
        "CPU time per result (us; whole run incl. start-up), by process; "
        "procs = worker processes seen"
    )
    head = (
        f"{'workload':<9} {'system':<20} "
        + " ".join(f"{k:>8}" for k in CPU_KINDS)
        + f" {'total':>8} {'procs':>6}"
    )
    print(head)
    print("-" * len(head))
    for key, systems in summary["rows"].items():
        for system, row in systems.items():
            label = LABELS[system].format(buffer=args.buffer, pack=args.pack)
            values = [row[f"cpu_us_{k}"] for k in CPU_KINDS]
            total = sum(v for v in values if v is not None) if any(values) else None
            print(
                f"{key:<9} {label:<20} "
                + " ".join(_fmt(v, "8.0f") for v in values)
                + f" {_fmt(total, '8.0f')} {_fmt(row['workers_started'], '6.0f')}"
            )
    print()
    for key, systems in summary["ratios"].items():
        for system, entry in systems.items():
            label = LABELS[system].format(buffer=args.buffer, pack=args.pack)
            if "e2e_vs_tune" in entry:
                value, target = entry["e2e_vs_tune"], entry["e2e_vs_tune_target"]
                shown = f"{_fmt(value, '6.2f')}{_unit(value, 'x')}"
                print(
                    f"{key:<9} {label:<20} end to end / Tune   {shown}"
                    f"{_verdict(value, target, f'{target or 0:g}x')}"
                )
                print(
                    f"{key:<9} {label:<20} steady / Tune       "
                    f"{_fmt(entry['steady_vs_tune'], '6.2f')}{_unit(entry['steady_vs_tune'], 'x')}"
                )
            if "e2e_vs_quiet" in entry:
                value = entry["e2e_vs_quiet"]
                pct = None if value is None else value * 100
                print(
                    f"{key:<9} {label:<20} with logs / without {_fmt(pct, '6.0f')}{_unit(pct, '%')}"
                    f"{_verdict(value, LOGGING_TARGET, f'{LOGGING_TARGET * 100:.0f}%')}"
                )
            for hooked in HOOK_SYSTEMS:
                if f"{hooked}_e2e" not in entry:
                    continue
                for what in ("e2e", "active"):
                    value = entry[f"{hooked}_{what}"]
                    pct = None if value is None else value * 100
                    verdict = ""
                    if hooked == "ours-hook" and what == "e2e":
                        verdict = _verdict(value, HOOK_TARGET, f"{HOOK_TARGET * 100:.0f}%")
                    name = "end to end" if what == "e2e" else what
                    print(
                        f"{key:<9} {LABELS[hooked]:<20} {name} / ours".ljust(51)
                        + f"{_fmt(pct, '6.0f')}{_unit(pct, '%')}{verdict}"
                    )
            if "dash_vs_closed" in entry:
                for what, field in (
                    ("end to end", "dash_vs_closed"),
                    ("steady", "dash_steady_vs_closed"),
                    ("active", "dash_active_vs_closed"),
                ):
                    value = entry[field]
                    pct = None if value is None else value * 100
                    verdict = ""
                    if field in ("dash_vs_closed", "dash_active_vs_closed"):
                        verdict = _verdict(
                            value, DASHBOARD_TARGET, f"{DASHBOARD_TARGET * 100:.0f}%"
                        )
                    print(
                        f"{key:<9} {label:<20} dashboard open / closed, {what}".ljust(60)
                        + f"{_fmt(pct, '6.0f')}{_unit(pct, '%')}{verdict}"
                    )
                cost = entry["dash_cpu_us"]
                print(
                    f"{key:<9} {label:<20} dashboard CPU (server + page) per result".ljust(60)
                    + f"{_fmt(cost, '6.1f')}{_unit(cost, ' us')}"
                )
            if "e2e_vs_baseline" in entry:
                for what in ("e2e", "steady", "active"):
                    value = entry[f"{what}_vs_baseline"]
                    print(
                        f"{key:<9} {label:<20} {what} / baseline".ljust(51)
                        + f"{_fmt(value, '6.2f')}{_unit(value, 'x')}"
                    )
            if "e2e_vs_tune_fn" in entry:
                value = entry["e2e_vs_tune_fn"]
                print(
                    f"{key:<9} {label:<20} end to end / Tune function   "
                    f"{_fmt(value, '6.2f')}{_unit(value, 'x')}"
                    f"{_verdict(value, FUNCTION_VS_TUNE_TARGET, f'{FUNCTION_VS_TUNE_TARGET:g}x')}"
                )
                value = entry["steady_vs_tune_fn"]
                print(
                    f"{key:<9} {label:<20} steady / Tune function       "
                    f"{_fmt(value, '6.2f')}{_unit(value, 'x')}"
                )
            if "e2e_vs_class" in entry:
                for what in ("e2e", "steady", "active"):
                    value = entry[f"{what}_vs_class"]
                    pct = None if value is None else value * 100
                    verdict = ""
                    if what == "e2e":
                        shown = f"{FUNCTION_VS_CLASS_TARGET * 100:.0f}%"
                        verdict = _verdict(value, FUNCTION_VS_CLASS_TARGET, shown)
                    name = "end to end" if what == "e2e" else what
                    print(
                        f"{key:<9} {label:<20} {name} / ours (class)".ljust(60)
                        + f"{_fmt(pct, '6.0f')}{_unit(pct, '%')}{verdict}"
                    )
            if "steady_vs_raw" in entry:
                value = entry["steady_vs_raw"]
                pct = None if value is None else value * 100
                target = entry["steady_vs_raw_target"]
                print(
                    f"{key:<9} {label:<20} steady / raw loop   {_fmt(pct, '6.0f')}{_unit(pct, '%')}"
                    f"{_verdict(value, target, f'{target * 100:.0f}%')}"
                )


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.report is not None:
        runs = json.loads(args.report.read_text())["runs"]
        print_report(args, summarize_runs(args, runs))
        return 0
    runs = []
    total = len(args.steps) * args.repeat * len(args.systems)
    n = 0
    previous_s = 0.0  # the length of the run before, for --rest-ratio
    for steps in args.steps:
        for attempt in range(args.repeat):
            # Interleave the systems so a noisy spell does not hit one system's runs only.
            order = args.systems if attempt % 2 == 0 else list(reversed(args.systems))
            for system in order:
                n += 1
                spec = _spec(args, system, steps)
                label = LABELS[system].format(buffer=args.buffer, pack=args.pack)
                print(
                    f"[{n}/{total}] {args.trials}x{steps} {label} (run {attempt + 1})...",
                    end=" ",
                    flush=True,
                )
                rest = max(args.cooldown, args.rest_ratio * previous_s)
                started = time.monotonic()
                root = args.baseline if system.startswith("baseline") else ROOT
                figures = run_one(spec, args.timeout, rest, root)
                previous_s = time.monotonic() - started - rest
                figures["rest_s"] = rest
                figures["system_label"] = system
                runs.append(figures)
                if figures.get("ok"):
                    print(
                        f"e2e {_fmt(figures['e2e_rate'], '.0f')}/s, steady "
                        f"{_fmt(figures['steady_rate'], '.0f')}/s, all running at "
                        f"{_fmt(figures['all_running_s'], '.1f')} s, "
                        f"load {figures['load_before']:.1f}, "
                        f"steal {figures['steal_s']:.1f} s"
                        + _dashboard_text(figures.get("dashboard")),
                        flush=True,
                    )
                else:
                    print(f"FAILED: {figures.get('error', figures)}", flush=True)
                _write(args, runs)  # after every run: a crash keeps what was measured
    print_report(args, summarize_runs(args, runs))
    print(f"\nfigures written to {args.out}")
    return 0 if all(r.get("ok") for r in runs) else 1


def _dashboard_text(dash: dict[str, Any] | None) -> str:
    if not dash:
        return ""
    return (
        f", the page got {dash.get('deltas')} updates; dashboard CPU "
        f"{dash.get('server_cpu_s', 0):.2f} s (server) + {dash.get('page_cpu_s', 0):.2f} s (page)"
    )


def _dashboard_us(run: dict[str, Any]) -> float | None:
    """The dashboard's CPU (server and page) per result, in microseconds."""
    dash, results = run.get("dashboard"), run.get("results")
    if not dash or not results:
        return None
    return (dash.get("server_cpu_s", 0.0) + dash.get("page_cpu_s", 0.0)) / results * 1e6


def _write(args: argparse.Namespace, runs: list[dict[str, Any]]) -> None:
    write_figures(args.out, "core", vars(args), summarize_runs(args, runs), runs)


if __name__ == "__main__":
    sys.exit(main())
