"""Where a short trial's time goes: a per-trial timeline of one sweep, driver and worker.

Runs one sweep under ``Orchestrator.sweep`` in this process (a private
``ray.init(num_cpus=2)``) with the loop's own timing counters switched on for the
probe: every event a trial's state machine handles, every actor created, every setup
sent, every stop carried out, stamped with ``time.monotonic()`` on the driver; the
trainable stamps its ``setup`` and the start of each step with ``time.time()`` on the
worker. From those it prints, as medians and 90th percentiles over the trials:

* ``decision -> slot free``: from the result on which the scheduler (or the stop
  criterion) decided the trial ends, to the trial TERMINATED (its slot free);
* ``slot free -> launch``: to the next trial's ``Launch`` (the searcher's suggestion,
  the spec, the journal);
* ``launch -> setup sent``: placement (an idle worker taken, or an actor created);
* ``setup sent -> ready``: the worker's ``setup`` of the trainable and the round trip
  (plus the process start when no worker was free);
* ``ready -> first step``: to the first step starting on the worker;
* ``slot free -> first step``: the whole hand-over, the sum of the four above.

Workloads: ``asha`` (the ``bench_schedulers`` one: 64 known curves, 4 at once, 5 ms
steps, ``max_t=81``, rf 3, defaults otherwise) and ``short`` (the ``bench_sweep`` one:
200 trials x 20 steps of 10 ms, 4 at once). With ``--py-spy`` the driver is sampled
by py-spy during the sweep (``--py-spy-out`` names the flame graph or speedscope file).

Usage::

    python -m benchmarks.probe_trial_overhead                 # asha
    python -m benchmarks.probe_trial_overhead --workload short
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ._sched_common import GRACE, MAX_T, RF, asha_curves, curve_value

#: (monotonic time, trial id, what) on the driver.
Stamp = tuple[float, str, str]


class Timeline:
    """The driver's stamps, switched on by wrapping the engine's entry points (a probe
    only: nothing here is part of the product)."""

    def __init__(self) -> None:
        self.stamps: list[Stamp] = []

    def add(self, trial_id: str, what: str) -> None:
        self.stamps.append((time.monotonic(), trial_id, what))

    @contextmanager
    def recording(self) -> Iterator[None]:
        from orchestrator.core.machine import TrialMachine, TrialState
        from orchestrator.engine.executor import Executor

        undo: list[Callable[[], None]] = []

        def wrap(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
            original = owner.__dict__[name]
            setattr(owner, name, make(original))
            undo.append(lambda: setattr(owner, name, original))

        add = self.add

        def handle(original: Any) -> Any:
            def traced(machine: Any, event: Any) -> Any:
                before, intent = machine.state, machine.intent
                actions = original(machine, event)
                name = type(event).__name__
                add(machine.trial_id, name)
                # The result on which the trial was told to end: an intent set now, or
                # (nothing in flight) settled at once.
                ends = machine.state.is_terminal and not before.is_terminal
                if (machine.intent is not None and intent is None) or ends:
                    add(machine.trial_id, "decided")
                if before.has_actor and machine.state is TrialState.TERMINATED:
                    add(machine.trial_id, "slot_free")
                return actions

            return traced

        def setup_on(original: Any) -> Any:
            def traced(executor: Any, rt: Any, *args: Any) -> Any:
                add(rt.id, "setup_sent")
                return original(executor, rt, *args)

            return traced

        def create_actor(original: Any) -> Any:
            def traced(executor: Any, host: Any) -> Any:
                add(",".join(sorted(host.members)) or "spare", "actor_created")
                return original(executor, host)

            return traced

        wrap(TrialMachine, "handle", handle)
        wrap(Executor, "_setup_on", setup_on)
        wrap(Executor, "create_actor", create_actor)
        try:
            yield
        finally:
            for restore in reversed(undo):
                restore()


def _trainable() -> Any:
    from orchestrator import Trainable

    class Probed(Trainable):
        """Sleeps ``step_s`` a step; follows a curve when the config has one. Stamps
        its set-up and each step's start (``time.time()``, worker side)."""

        def setup(self, config: dict[str, Any]) -> None:
            self.i = 0
            self.t_setup = time.time()

        def step(self) -> dict[str, Any]:
            started = time.time()
            time.sleep(self.config["step_s"])
            self.i += 1
            curves = self.config.get("curves")
            value = curve_value(curves[self.config["index"]], self.i) if curves else 0.0
            return {"value": value, "t_step": started, "t_setup": self.t_setup}

    return Probed


async def run_sweep(
    timeline: Timeline, workload: str, seed: int, buffer: int | None
) -> tuple[Any, float, float]:
    """The sweep's result, the wall clock (``time.time``) and the monotonic clock at its
    start (to put worker stamps on the driver's clock)."""
    from orchestrator import Orchestrator
    from orchestrator.schedulers import ASHA
    from orchestrator.search import grid, uniform

    with tempfile.TemporaryDirectory(prefix="probe-overhead-") as tmp:
        async with Orchestrator(storage=tmp, name="probe", num_cpus=2, log_to_driver=False) as orch:
            wall0, mono0 = time.time(), time.monotonic()
            if workload == "asha":
                curves = asha_curves(64, seed)
                result = await orch.sweep(
                    _trainable(),
                    {"index": grid(list(range(64))), "curves": curves, "step_s": 0.005},
                    metric="value",
                    mode="max",
                    scheduler=ASHA(max_t=MAX_T, grace_period=GRACE, reduction_factor=RF),
                    max_concurrent_trials=4,
                    stop={"training_iteration": 10 * MAX_T},
                    resources={"cpu": 0.5},
                    seed=seed,
                    result_buffer=buffer,
                )
            else:
                result = await orch.sweep(
                    _trainable(),
                    {"x": uniform(0, 1), "step_s": 0.01},
                    num_samples=200,
                    metric="value",
                    mode="max",
                    max_concurrent_trials=4,
                    stop={"training_iteration": 20},
                    resources={"cpu": 0.5},
                    seed=seed,
                )
            timeline.add("-", "sweep_end")
            return result, wall0, mono0


def analyse(timeline: Timeline, result: Any, wall0: float, mono0: float) -> dict[str, Any]:
    """The hand-over phases per trial (see the module docstring)."""
    first: dict[tuple[str, str], float] = {}
    for t, trial, what in timeline.stamps:
        first.setdefault((trial, what), t)
    trials = list(result.trials)
    worker: dict[str, tuple[float, float]] = {}
    for trial in trials:
        results = trial.results
        if results:  # worker stamps onto the driver's monotonic clock
            worker[trial.id] = (
                results[0]["t_setup"] - wall0 + mono0,
                results[0]["t_step"] - wall0 + mono0,
            )
    frees = sorted(first[(t.id, "slot_free")] for t in trials if (t.id, "slot_free") in first)
    phases: dict[str, list[float]] = {
        "decision -> slot free": [],
        "slot free -> launch": [],
        "launch -> setup sent": [],
        "setup sent -> ready": [],
        "ready -> first step": [],
        "slot free -> first step": [],
    }
    for trial in trials:
        tid = trial.id
        if (tid, "decided") in first and (tid, "slot_free") in first:
            decided = first[(tid, "decided")]
            phases["decision -> slot free"].append(first[(tid, "slot_free")] - decided)
    # The k-th launch after the first `concurrency` ones follows the k-th freed slot.
    launches = sorted((first[(t.id, "Launch")], t.id) for t in trials)
    concurrency = 4
    for (launched, tid), freed in zip(launches[concurrency:], frees, strict=False):
        sent = first.get((tid, "setup_sent"))
        ready = first.get((tid, "ActorReady"))
        step = worker.get(tid, (None, None))[1]
        phases["slot free -> launch"].append(launched - freed)
        if sent is not None:
            phases["launch -> setup sent"].append(sent - launched)
        if sent is not None and ready is not None:
            phases["setup sent -> ready"].append(ready - sent)
        if ready is not None and step is not None:
            phases["ready -> first step"].append(step - ready)
        if step is not None:
            phases["slot free -> first step"].append(step - freed)
    readies = sorted(t for t, _, what in timeline.stamps if what == "ActorReady")
    marks = {
        "first actor asked for": min(t for t, _, w in timeline.stamps if w == "actor_created"),
        "first trial ready": readies[0],
        f"{concurrency}th trial ready": readies[min(concurrency, len(readies)) - 1],
        "last slot free": frees[-1],
        "sweep returned": first[("-", "sweep_end")],
    }
    created = sum(1 for _, _, what in timeline.stamps if what == "actor_created")
    steps = sum(int((t.last_result or {}).get("training_iteration") or 0) for t in trials)
    # Inside a trial: from its first step's start to its last step's end, less the steps'
    # own time (the train calls' round trips, and waits for the driver's next call).
    inside = []
    for trial in trials:
        results = trial.results
        if len(results) > 1:
            span = results[-1]["t_step"] + results[-1]["time_this_iter_s"] - results[0]["t_step"]
            inside.append(span - sum(r["time_this_iter_s"] for r in results))
    phases["between steps, per trial"] = inside
    finals = [int((t.last_result or {}).get("training_iteration") or 0) for t in trials]
    return {
        "finals": finals,
        "marks": {k: v - mono0 for k, v in marks.items()},
        "phases": phases,
        "actors_created": created,
        "trials": len(trials),
        "steps": steps,
    }


def _stats(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"{statistics.median(ordered) * 1e3:8.1f} {p90 * 1e3:8.1f} {len(ordered):5d}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.probe_trial_overhead")
    parser.add_argument("--workload", choices=("asha", "short"), default="asha")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--result-buffer", type=int, default=None, help="default: adaptive")
    parser.add_argument("--py-spy", action="store_true", help="sample the driver with py-spy")
    parser.add_argument("--py-spy-out", default="/tmp/probe-driver.txt")
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    timeline = Timeline()
    spy = None
    if args.py_spy:
        spy = subprocess.Popen(
            [
                "py-spy",
                "record",
                "--pid",
                str(os.getpid()),
                "--format",
                "raw",
                "--rate",
                "200",
                "--output",
                args.py_spy_out,
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    started = time.monotonic()
    with timeline.recording():
        result, wall0, mono0 = asyncio.run(
            run_sweep(timeline, args.workload, args.seed, args.result_buffer)
        )
    elapsed = time.monotonic() - started
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait()
    figures = analyse(timeline, result, wall0, mono0)
    print(f"load average: {os.getloadavg()}")
    print(
        f"{args.workload}: {figures['trials']} trials, {figures['steps']} steps, "
        f"{figures['actors_created']} actors created, {elapsed:.1f} s with Ray's start"
    )
    print("last iteration of each trial, in creation order:", figures["finals"])
    for name, at in figures["marks"].items():
        print(f"{name:<26} {at:8.2f} s after the sweep began")
    print(f"{'phase (ms)':<26} {'median':>8} {'p90':>8} {'n':>5}")
    for name, values in figures["phases"].items():
        print(f"{name:<26} {_stats(values)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
