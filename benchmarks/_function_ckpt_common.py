"""Shared pieces of ``bench_function_ckpt``: the epoch loop both systems run, and the
figures of one run.

Both systems run the *same* loop (:func:`epoch_loop`); only the call that reports a
result differs (``orchestrator.report`` or ``ray.tune.report``). Each epoch is

1. ``iterations`` rounds of a pure-Python integer loop (:func:`busy`): a fixed amount
   of CPU work, calibrated once by the parent (:func:`calibrate`) and the same for
   every run;
2. with checkpoints, one file of ``size`` bytes (plus a small ``meta.json``) written
   into a fresh ``tempfile.TemporaryDirectory()`` by ``_restore_common.Payload``;
3. the report, with that directory as the checkpoint or with none.

Each result carries the function's own clock: ``t`` (``time.time()`` just before the
report call), ``work_s`` (wall seconds of step 1), ``work_cpu_s`` (that thread's CPU
seconds for it), ``write_s`` (step 2) and ``prev_report_s`` (how long the previous
report call blocked; -1 on the first). An epoch's time is the gap between two
consecutive results' ``t``: work + write + the previous report.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from . import _core_common as _core
from ._restore_common import Payload, _block

RESULT_MARKER = "@@function-ckpt-result "
#: Every system starts its own Ray with this many CPUs.
NUM_CPUS = 2

#: ``send(metrics, checkpoint_dir_or_None)``: one system's report call.
Send = Callable[[dict[str, Any], "str | None"], None]


def busy(iterations: int) -> int:
    """A fixed amount of CPU work: ``iterations`` rounds of integer arithmetic, in pure
    Python (it holds the GIL, as a Python training step does between library calls)."""
    x = 0
    for i in range(iterations):
        x = (x * 31 + i) & 0xFFFFFFFF
    return x


def calibrate(work_s: float, probe: int = 2_000_000) -> int:
    """Iterations of :func:`busy` that take about ``work_s`` CPU-seconds here.

    Measured by this process's CPU time, not the wall clock, so a busy machine changes
    the estimate less (it still counts whatever the hypervisor steals)."""
    busy(probe // 10)  # warm up
    best = float("inf")
    for _ in range(3):
        c0 = time.process_time()
        busy(probe)
        best = min(best, time.process_time() - c0)
    return max(1, int(probe * work_s / max(best, 1e-6)))


def epoch_loop(config: dict[str, Any], send: Send) -> None:
    """Run ``config["epochs"]`` epochs (see the module's docstring) and report each."""
    epochs, size = int(config["epochs"]), int(config["size"])
    iterations, checkpoint = int(config["iterations"]), bool(config["checkpoint"])
    payload = Payload({"size": size})
    if checkpoint:
        _block()  # the random block the payload repeats: made before the clock runs
    prev_report = -1.0
    for epoch in range(epochs):
        w0, c0 = time.time(), time.thread_time()
        busy(iterations)
        w1 = time.time()
        metrics: dict[str, Any] = {
            "epoch": epoch,
            "work_s": w1 - w0,
            "work_cpu_s": time.thread_time() - c0,
            "prev_report_s": prev_report,
        }
        if checkpoint:
            with tempfile.TemporaryDirectory(prefix="bench-fnckpt-") as d:
                payload.save(d, epoch)
                w2 = time.time()
                metrics.update(write_s=w2 - w1, t=w2)
                send(metrics, d)
                prev_report = time.time() - w2
        else:
            metrics.update(write_s=0.0, t=w1)
            send(metrics, None)
            prev_report = time.time() - w1


def summarize(
    spec: dict[str, Any],
    results: Sequence[dict[str, Any]],
    *,
    t0: float,
    t_ray: float,
    t_end: float,
    checkpoints_kept: int | None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One run's figures from its results (in report order).

    ``epoch_s``: the gaps between consecutive results' ``t`` (``epochs - 1`` of them);
    ``report_s``: how long each report call blocked (known for all but the last);
    ``run_s``: before Ray starts to the end of ``run()`` / ``fit()`` (the last upload
    included); ``ray_up_s``: Ray's start.
    """
    results = sorted(results, key=lambda r: float(r["t"]))
    stamps = [float(r["t"]) for r in results]
    epoch_s = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    report_s = [float(r["prev_report_s"]) for r in results if float(r["prev_report_s"]) >= 0]
    figures: dict[str, Any] = {
        "ok": len(results) == int(spec["epochs"]),
        "results": len(results),
        "epoch_s": epoch_s,
        "epoch_median_s": median(epoch_s),
        "work_s": [float(r["work_s"]) for r in results],
        "work_cpu_s": [float(r["work_cpu_s"]) for r in results],
        "write_s": [float(r["write_s"]) for r in results],
        "report_s": report_s,
        "ray_up_s": t_ray - t0,
        "first_report_s": (stamps[0] - t0) if stamps else None,
        "run_s": t_end - t0,
        "checkpoints_kept": checkpoints_kept,
    }
    if extra:
        figures.update(extra)
    return figures


def median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def emit(figures: dict[str, Any]) -> None:
    _core.emit(figures, RESULT_MARKER)


def parse_child_output(stdout: str) -> dict[str, Any] | None:
    return _core.parse_child_output(stdout, RESULT_MARKER)
