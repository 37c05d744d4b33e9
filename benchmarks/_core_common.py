"""Shared pieces of the core benchmark: the run spec, timing and the figures of one run.

Every system's trainable (a class, or a function for ``ours-fn`` and ``tune-fn``)
stamps each result with ``t`` (``time.time()`` in the actor, right after the step), so
the systems are measured by the same clock and the same rule, whatever each one
records by itself. Times in a run's figures are seconds since ``t0``, taken in the
child process before Ray starts.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

#: Prefix of the one stdout line a child prints with its figures (the rest is noise).
RESULT_MARKER = "@@core-result "

#: Every system starts its own Ray with this many CPUs, so all see the same cluster.
NUM_CPUS = 2


@dataclass(frozen=True)
class RunSpec:
    system: str  # "ours", "tune" or "raw"
    trials: int
    steps: int
    checkpoint_every: int
    keep: int
    cpu: float
    result_buffer: int | None = None  # None: the orchestrator's default (adaptive)
    trials_per_worker: int = 1
    quiet: bool = False  # ours without its default loggers and progress display
    #: The trainable as a function (``def trivial(config)`` calling ``report``) rather
    #: than a class: the systems ``ours-fn`` and ``tune-fn``.
    function: bool = False
    #: A trivial user result hook (it counts results): "async" (``async def``), "sync"
    #: (run in the hook thread pool) or None. The systems ``ours-hook`` and
    #: ``ours-hook-sync``: what a user's hook costs, its pacing of the trials included.
    result_hook: str | None = None
    #: The dashboard open on the experiment while it runs (``ours-dash``).
    dashboard: bool = False


def summarize(
    spec: RunSpec,
    *,
    t0: float,
    t_ray: float,
    t_end: float,
    t_exit: float,
    stamps: Sequence[Sequence[float]],
    checkpoints_kept: int | None = None,
    cpu: dict[str, float] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Turn one run's raw timings into its figures.

    ``stamps`` holds each trial's result timestamps (absolute ``time.time()``). The
    steady-state window runs from the moment the *last* trial reported its first result
    (every trial is running) to the moment the *first* trial reported its last one (no
    trial has finished); the rate is the results stamped inside it per second. When
    start-up is so slow that some trial ends before another begins, there is no such
    window and the steady rate is ``None``.
    """
    results = sum(len(s) for s in stamps)
    expected = spec.trials * spec.steps
    firsts = [min(s) for s in stamps if s]
    lasts = [max(s) for s in stamps if s]
    all_running = max(firsts) if firsts else None
    first_done = min(lasts) if lasts else None
    steady: float | None = None
    window = 0.0
    if all_running is not None and first_done is not None and first_done > all_running:
        window = first_done - all_running
        inside = sum(1 for s in stamps for t in s if all_running < t <= first_done)
        steady = inside / window if window > 0 else None
    elapsed = t_end - t0
    figures: dict[str, Any] = {
        "spec": asdict(spec),
        "results": results,
        "expected_results": expected,
        "ok": results == expected and len(stamps) == spec.trials,
        "e2e_s": elapsed,
        "e2e_rate": results / elapsed if elapsed > 0 else None,
        "steady_rate": steady,
        # From the first result to the last: start-up of Ray excluded, staggered actor
        # start-up included. Defined even when the steady window is not.
        "active_rate": (
            results / (max(lasts) - min(firsts)) if firsts and max(lasts) > min(firsts) else None
        ),
        "steady_window_s": window,
        "ray_up_s": t_ray - t0,
        "first_result_s": (min(firsts) - t0) if firsts else None,
        "all_running_s": (all_running - t0) if all_running is not None else None,
        "first_done_s": (first_done - t0) if first_done is not None else None,
        "last_result_s": (max(lasts) - t0) if lasts else None,
        "end_s": elapsed,
        "exit_s": t_exit - t0,
        "checkpoints_kept": checkpoints_kept,
        "cpu_s": cpu,
    }
    if extra:
        figures.update(extra)
    return figures


def emit(figures: dict[str, Any], marker: str = RESULT_MARKER) -> None:
    sys.stdout.write(marker + json.dumps(figures) + "\n")
    sys.stdout.flush()


def parse_child_output(stdout: str, marker: str = RESULT_MARKER) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(marker):
            parsed: dict[str, Any] = json.loads(line[len(marker) :])
            return parsed
    return None


def median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


class CpuSampler:
    """Where the CPU time of a run goes: this driver, Ray's workers, raylet, GCS, rest.

    A daemon thread polls every process descended from the driver (a local
    ``ray.init`` spawns the raylet and GCS, and the raylet the workers) and keeps each
    one's latest cumulative CPU time; a process that exits keeps its last sample, so up
    to one ``interval`` of its time may be missed. Call :meth:`stop` at the end of the
    timed region, before Ray shuts down. The thread's own CPU is left out of the
    driver's; it still takes the GIL briefly every ``interval``.
    """

    def __init__(self, interval: float = 2.0) -> None:
        import psutil

        self._psutil = psutil
        self._me = psutil.Process()
        self._interval = interval
        self._seen: dict[int, tuple[str, float]] = {}
        self._cpu0 = time.process_time()
        self._own = 0.0  # this thread's CPU, not the driver's: psutil scans all of /proc
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        psutil = self._psutil
        try:
            children = self._me.children(recursive=True)
        except psutil.Error:
            return
        for proc in children:
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    # Classified every time: a process seen between fork and exec still
                    # shows its parent's command line, and workers rename themselves.
                    kind = self._kind(" ".join(proc.cmdline()))
            except psutil.Error:
                continue
            self._seen[proc.pid] = (kind, times.user + times.system)

    def _kind(self, cmdline: str) -> str:
        """The kind a process's CPU is counted under (a subclass may be finer)."""
        return _process_kind(cmdline)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            start = time.thread_time()
            self._sample()
            self._own += time.thread_time() - start

    def stop(self) -> dict[str, float]:
        """Seconds of CPU by kind of process, from start until now."""
        self._stop.set()
        self._thread.join()
        self._sample()
        driver = time.process_time() - self._cpu0 - self._own
        totals: dict[str, float] = {"driver": driver, "sampler": self._own}
        for kind, seconds in self._seen.values():
            totals[kind] = totals.get(kind, 0.0) + seconds
        totals["workers_n"] = float(sum(1 for k, _ in self._seen.values() if k == "workers"))
        return totals


_RAY_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")
#: trialflow's checkpoint uploader, one per node: counted apart from the trial workers.
_PERSISTER = "ray::CheckpointPersister"


def _process_kind(cmdline: str) -> str:
    words = cmdline.split(" ", 2)
    program = words[0]
    if program.endswith("/raylet"):  # its flags name default_worker.py: test it first
        return "raylet"
    if program.endswith("/gcs_server"):
        return "gcs"
    # A worker renames itself "ray::IDLE", "ray::<ActorClass>"... once it runs.
    if cmdline.startswith("ray::"):
        if cmdline.startswith(_PERSISTER):
            return "persister"
        return "other" if cmdline.startswith(_RAY_AGENTS) else "workers"
    if len(words) > 1 and words[1].endswith("default_worker.py"):
        return "workers"
    return "other"


def _cpu_ticks() -> list[int]:
    """The machine's cumulative CPU ticks (user, nice, system, idle, iowait, irq,
    softirq, steal, ...) from /proc/stat."""
    with open("/proc/stat") as fh:
        return [int(x) for x in fh.readline().split()[1:]]


def steal_seconds() -> float:
    """CPU seconds the hypervisor has taken from this machine so far (all CPUs).

    This VM is throttled under sustained load: a run that follows others can lose
    several seconds of CPU to steal, and runs slower for it. Each run records its steal
    so a comparison can see which runs were hit.
    """
    ticks = _cpu_ticks()
    steal = ticks[7] if len(ticks) > 7 else 0
    return steal / os.sysconf("SC_CLK_TCK")


def _busy_fraction(interval: float) -> float:
    """The machine's CPU busy fraction over ``interval`` seconds (from /proc/stat)."""

    def sample() -> tuple[int, int]:
        fields = _cpu_ticks()
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields), idle

    total0, idle0 = sample()
    time.sleep(interval)
    total1, idle1 = sample()
    span = total1 - total0
    return 1.0 - (idle1 - idle0) / span if span > 0 else 0.0


def settle(max_busy: float = 0.15, timeout: float = 60.0, cooldown: float = 0.0) -> float:
    """Wait ``cooldown`` seconds, then until the machine is quiet (busy below
    ``max_busy`` for one second), at most ``timeout`` seconds; return the last busy
    fraction seen.

    A run's Ray processes take seconds to exit after it ends; a run started while they
    still burn CPU pays for them, and the next system compared looks slower than it is.
    The cool-down lets the hypervisor's throttling (see :func:`steal_seconds`) ease.
    """
    time.sleep(cooldown)
    deadline = time.monotonic() + timeout
    busy = _busy_fraction(1.0)
    while busy > max_busy and time.monotonic() < deadline:
        busy = _busy_fraction(1.0)
    return busy
