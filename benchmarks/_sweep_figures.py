"""The figures of one ``bench_sweep`` run, from the same raw timings for both systems.

Times are seconds since ``t0``, taken in the child before Ray starts. Each trial's
trainable stamps every result with ``t`` (``time.time()`` when the step ended) and
``t_start`` (when this trial's trainable was set up, or reset for it when an actor is
reused), so both systems are measured by the same clock and the same rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._sweep_common import max_overlap

#: (last training_iteration, t_start, t of the last result) of one trial.
TrialTimes = tuple[int, float | None, float | None]


def last_of(result: Mapping[str, Any] | None) -> TrialTimes:
    """One trial's :data:`TrialTimes`, from its last result (None: it reported none)."""
    if not result:
        return (0, None, None)
    return (int(result.get("training_iteration") or 0), result.get("t_start"), result.get("t"))


def sweep_figures(
    spec: Mapping[str, Any],
    *,
    t0: float,
    t_ray: float,
    t_end: float,
    t_exit: float,
    per_trial: Sequence[TrialTimes],
    cpu: Mapping[str, float],
    rss: tuple[int, int],
    errors: int,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Turn one run's raw timings into its figures.

    * ``e2e_s``: from before Ray starts to the end of the sweep (Ray's shutdown left out,
      shown as ``exit_s``); ``ray_up_s``: Ray's start; ``after_ray_s`` = the difference.
    * ``ideal_s``: trials x steps x step time / concurrency, what a framework with no
      overhead at all would take once Ray is up; ``overhead_s`` = ``e2e_s`` - ideal
      (Ray's start included) and ``overhead_after_ray_s`` = ``after_ray_s`` - ideal.
    * ``max_running``: the most trials between their set-up and their last result at
      one moment (both systems must hold exactly ``concurrency``).
    * ``driver_cpu_us_per_result``: the driver process's CPU time from Ray up to the
      end of the sweep (the sampler thread's own left out) per result.
    * ``rss_growth_per_trial_kib``: the driver's RSS at the end minus after Ray's start,
      per trial.
    """
    results = sum(n for n, _, _ in per_trial)
    expected = spec["trials"] * spec["steps"]
    spans = [(a, b) for _, a, b in per_trial if a is not None and b is not None]
    ideal = spec["trials"] * spec["steps"] * spec["step_s"] / spec["concurrency"]
    e2e = t_end - t0
    after = t_end - t_ray
    driver = float(cpu.get("driver", 0.0))
    figures: dict[str, Any] = {
        "ok": results == expected and len(per_trial) == spec["trials"] and errors == 0,
        "trials": len(per_trial),
        "results": results,
        "expected_results": expected,
        "errors": errors,
        "e2e_s": e2e,
        "ray_up_s": t_ray - t0,
        "after_ray_s": after,
        "exit_s": t_exit - t0,
        "ideal_s": ideal,
        "overhead_s": e2e - ideal,
        "overhead_after_ray_s": after - ideal,
        "first_start_s": min(a for a, _ in spans) - t0 if spans else None,
        "last_result_s": max(b for _, b in spans) - t0 if spans else None,
        "max_running": max_overlap(spans),
        "driver_cpu_s": driver,
        "driver_cpu_us_per_result": driver / results * 1e6 if results else None,
        "cpu_s": dict(cpu),
        "rss_after_ray_mib": rss[0] / 2**20,
        "rss_end_mib": rss[1] / 2**20,
        "rss_growth_per_trial_kib": (rss[1] - rss[0]) / 1024 / max(1, len(per_trial)),
    }
    if extra:
        figures.update(extra)
    return figures
