"""What ``bench_sweep`` and ``bench_schedulers`` share: one run in a fresh child process,
rests between runs, medians with their spread, verdicts and the JSON file.

A child is ``python -m benchmarks.<module> '<spec as JSON>'``; it prints one line
``@@sweep-result <figures as JSON>`` (the rest of its output is noise). Each child starts
its own private Ray (``ray.init(address="local", num_cpus=2)``, or the orchestrator
doing the same), so nothing warm carries over from one run to the next.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ._core_common import emit, parse_child_output, settle, steal_seconds

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = Path(__file__).resolve().parent / "out"
MARKER = "@@sweep-result "


def emit_figures(figures: dict[str, Any]) -> None:
    """In a child: print its figures for the parent."""
    emit(figures, MARKER)


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)  # every child starts a private cluster
    env.setdefault("RAY_AUTH_MODE", "disabled")
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run_child_module(module: str, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """``python -m benchmarks.<module> '<spec>'`` in a fresh process: the figures it
    printed, or ``{"ok": False, "error": ...}`` with its stderr's tail (or the timeout)."""
    command = [sys.executable, "-m", f"benchmarks.{module}", json.dumps(spec)]
    try:
        proc = subprocess.run(
            command,
            cwd=ROOT,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout:.0f} s"}
    figures = parse_child_output(proc.stdout, MARKER)
    if figures is None:
        tail = "\n".join(proc.stderr.strip().splitlines()[-20:])
        return {
            "ok": False,
            "error": f"exit status {proc.returncode}, no figures; stderr tail:\n{tail}",
        }
    return figures


def rss_bytes() -> int:
    """This process's resident set size."""
    import psutil

    return int(psutil.Process().memory_info().rss)


class Runner:
    """Runs children one after another, resting before each: ``cooldown`` seconds and at
    least ``rest_ratio`` x the previous run's length, then until the machine is idle
    (this VM is throttled under sustained load; see README, Benchmarks)."""

    def __init__(self, cooldown: float, rest_ratio: float, timeout: float, total: int) -> None:
        self.cooldown, self.rest_ratio, self.timeout = cooldown, rest_ratio, timeout
        self.total, self.done, self.previous_s = total, 0, 0.0

    def run(self, module: str, spec: dict[str, Any], label: str) -> dict[str, Any]:
        self.done += 1
        print(f"[{self.done}/{self.total}] {label}...", end=" ", flush=True)
        rest = max(self.cooldown, self.rest_ratio * self.previous_s)
        busy = settle(cooldown=rest)
        load = os.getloadavg()
        steal0 = steal_seconds()
        started = time.monotonic()
        figures = run_child_module(module, spec, self.timeout)
        self.previous_s = time.monotonic() - started
        figures.update(
            spec=spec,
            label=label,
            load_before=load[0],
            loadavg_before=list(load),
            busy_before=busy,
            rest_s=rest,
            steal_s=steal_seconds() - steal0,
            process_s=self.previous_s,
        )
        status = "ok" if figures.get("ok") else f"FAILED: {figures.get('error', '?')}"
        print(
            f"{status}; load before {load[0]:.2f}, steal {figures['steal_s']:.1f} s, "
            f"{self.previous_s:.1f} s",
            flush=True,
        )
        return figures


def spread(values: Sequence[float | None]) -> dict[str, float | None]:
    """Median, min and max of the values present."""
    present = sorted(float(v) for v in values if v is not None)
    if not present:
        return {"median": None, "min": None, "max": None, "n": 0}
    n = len(present)
    mid = present[n // 2] if n % 2 else (present[n // 2 - 1] + present[n // 2]) / 2
    return {"median": mid, "min": present[0], "max": present[-1], "n": n}


def fmt(value: float | None, pattern: str = ".1f") -> str:
    return "-" if value is None else format(value, pattern)


def fmt_spread(s: dict[str, float | None], pattern: str = ".1f") -> str:
    """``median [min-max]`` (just the median for one value)."""
    if s["median"] is None:
        return "-"
    if s["n"] == 1 or s["min"] == s["max"]:
        return fmt(s["median"], pattern)
    return f"{fmt(s['median'], pattern)} [{fmt(s['min'], pattern)}-{fmt(s['max'], pattern)}]"


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def verdict(value: float | None, ok: Callable[[float], bool], target: str) -> str:
    """``value  (target ...: met|MISSED)``, or ``n/a`` without a value."""
    if value is None:
        return f"n/a (target {target})"
    return f"{value:.2f}  (target {target}: {'met' if ok(value) else 'MISSED'})"


def max_overlap(intervals: Sequence[tuple[float, float]]) -> int:
    """The most intervals open at one moment (touching ends do not overlap)."""
    edges = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    best = current = 0
    for _, delta in edges:  # at equal times the -1 sorts first
        current += delta
        best = max(best, current)
    return best
