"""Where ``bench_release``'s bookkeeping_overhead time goes: its start, and each slot's
hand-over from one trial to the next (issue 36).

Runs the workload as ``bench_release`` does (Ray Tune's API through the facade, a
private Ray of 8 logical CPUs, one function trainable per trial reporting once and
sleeping ``--sleep`` seconds, 1 CPU each, ``reuse_actors=True``), in this process, with
the driver's stamps of ``probe_trial_overhead.Timeline`` (each event a trial's machine
handles, each actor created, each setup sent) and Ray's own timeline of the workers'
calls (``ray.timeline()``: when each ``setup``, ``train_many`` and ``stop`` ran on its
worker). It prints:

* the start: when ``tune.run`` asked for its first worker, when the first and the
  8th trial were ready, and each worker process's start and CPU seconds at its first
  report (what Ray's worker start costs on this machine);
* per trial (medians and 90th percentiles): the driver's hand-over (``slot free ->
  next Launch``, ``Launch -> setup sent``, ``setup sent -> ready``) and the workers'
  gaps between calls (``train_many end -> stop start``: the result's way to the
  driver and back; ``stop end -> setup start``: the next trial's admission;
  ``setup end -> train_many start``: the setup's round trip, gone when the first
  call goes with the setup);
* the wall time against the ideal, and the end (the last slot free to the return).

``python -m benchmarks.probe_bookkeeping [--trials 240] [--sleep 1.0]``
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from ._shared import init_private_ray
from .probe_trial_overhead import Timeline

CPUS = 8


def _stats(values: list[float]) -> str:
    if not values:
        return "       -        -     0"
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"{statistics.median(ordered) * 1e3:8.1f} {p90 * 1e3:8.1f} {len(ordered):5d}"


def run(trials: int, sleep_s: float) -> dict[str, Any]:
    init_private_ray(CPUS)
    import ray

    import orchestrator.tune as tune

    def reporting(config: dict[str, Any]) -> None:
        import psutil

        me = psutil.Process()
        tune.report(
            {
                "score": config["score"],
                "t_report": time.time(),
                "pid": os.getpid(),
                "t_process": me.create_time(),
                "cpu_s": sum(me.cpu_times()[:2]),
            }
        )
        time.sleep(config["sleep_s"])

    timeline = Timeline()
    with tempfile.TemporaryDirectory(prefix="probe-bookkeeping-") as tmp, timeline.recording():
        wall0, mono0 = time.time(), time.monotonic()
        analysis = tune.run(
            reporting,
            config={"score": tune.uniform(0.0, 1.0), "sleep_s": sleep_s},
            num_samples=trials,
            resources_per_trial={"cpu": 1},
            reuse_actors=True,
            raise_on_failed_trial=False,
            verbose=0,
            name="bookkeeping",
            storage_path=tmp,
        )
        wall = time.monotonic() - mono0
    calls = [e for e in ray.timeline() if e.get("ph") == "X"]
    return {
        "analysis": analysis,
        "stamps": [(t - mono0, trial, what) for t, trial, what in timeline.stamps],
        "calls": calls,
        "wall": wall,
        "wall0": wall0,
    }


def analyse(figures: dict[str, Any]) -> None:
    stamps, wall0 = figures["stamps"], figures["wall0"]
    by_trial: dict[str, dict[str, float]] = collections.defaultdict(dict)
    for t, trial, what in stamps:
        by_trial[trial].setdefault(what, t)
    trials = {k: v for k, v in by_trial.items() if "Launch" in v}
    created = sorted(t for t, _, what in stamps if what == "actor_created")
    readies = sorted(v["ActorReady"] for v in trials.values() if "ActorReady" in v)
    frees = sorted(v["slot_free"] for v in trials.values() if "slot_free" in v)
    launches = sorted(v["Launch"] for v in trials.values())
    print(f"first worker asked for   {created[0]:7.3f} s after tune.run began")
    print(f"first / {CPUS}th trial ready  {readies[0]:7.3f} / {readies[CPUS - 1]:7.3f} s")
    print(f"last slot free           {frees[-1]:7.3f} s; tune.run returned {figures['wall']:.3f} s")
    workers: dict[int, tuple[float, float, float]] = {}
    for trial in figures["analysis"].trials:
        r = trial.last_result or {}
        if "pid" in r and r["pid"] not in workers:
            workers[r["pid"]] = (r["t_process"] - wall0, r["t_report"] - wall0, r["cpu_s"])
    print("worker processes: started (s), first report (s), CPU s at it")
    for started, first, cpu in sorted(workers.values()):
        print(f"  {started:7.3f} {first:7.3f} {cpu:5.2f}")
    phases: dict[str, list[float]] = collections.defaultdict(list)
    for launched, freed in zip(launches[CPUS:], frees, strict=False):
        phases["slot free -> next Launch"].append(launched - freed)
    for v in trials.values():
        for a, b in (("Launch", "setup_sent"), ("setup_sent", "ActorReady")):
            if a in v and b in v:
                phases[f"{a} -> {b}"].append(v[b] - v[a])
    per_worker: dict[Any, list[tuple[float, float, str]]] = collections.defaultdict(list)
    for e in figures["calls"]:
        if e["name"] in ("setup", "train_many", "train_sole", "train", "stop"):
            per_worker[e.get("tid")].append((e["ts"] / 1e6, e["dur"] / 1e6, e["name"]))
    for events in per_worker.values():
        events.sort()
        for (s1, d1, n1), (s2, _, n2) in zip(events, events[1:], strict=False):
            phases[f"worker: {n1} end -> {n2} start"].append(s2 - (s1 + d1))
    print(f"{'per trial (ms)':<42} {'median':>8} {'p90':>8} {'n':>5}")
    for name in sorted(phases):
        print(f"{name:<42} {_stats(phases[name])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.probe_bookkeeping")
    parser.add_argument("--trials", type=int, default=240)
    parser.add_argument("--sleep", type=float, default=1.0)
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    load = os.getloadavg()
    figures = run(args.trials, args.sleep)
    ideal = -(-args.trials // CPUS) * args.sleep
    print(f"load average before: {load[0]:.1f}, after: {os.getloadavg()[0]:.1f}")
    print(f"wall {figures['wall']:.2f} s, ideal {ideal:.1f} s: x{figures['wall'] / ideal:.3f}")
    analyse(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
