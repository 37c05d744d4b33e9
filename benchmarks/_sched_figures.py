"""The figures of one ``bench_schedulers`` run, by the same rules for both systems.

Times are seconds since ``t0``, taken in the child before Ray starts: ``e2e_s`` to the
end of the sweep (Ray's shutdown left out, shown as ``exit_s``), ``ray_up_s`` for Ray's
start, ``after_ray_s`` the difference.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ._sched_common import (
    GRACE,
    MAX_T,
    RF,
    curve_value,
    exploit_latencies,
    read_events,
    true_rank,
)

#: ASHA's rungs (grace 1, rf 3, max_t 81: 1, 3, 9, 27, 81): an exact ASHA stops every
#: trial on one.
RUNGS = frozenset(GRACE * RF**k for k in range(5) if GRACE * RF**k <= MAX_T)


def _times(t0: float, t_ray: float, t_end: float, t_exit: float) -> dict[str, float]:
    return {
        "e2e_s": t_end - t0,
        "ray_up_s": t_ray - t0,
        "after_ray_s": t_end - t_ray,
        "exit_s": t_exit - t0,
    }


def asha_figures(
    spec: Mapping[str, Any],
    *,
    t0: float,
    t_ray: float,
    t_end: float,
    t_exit: float,
    lasts: Sequence[Mapping[str, Any]],
    best: int | None,
    errors: int,
) -> dict[str, Any]:
    """``iterations``: the sum of every trial's last ``training_iteration`` (the steps
    ASHA let run); ``best_index``: the trial the system reports best (by its last
    result), ``best_true_rank`` its rank among the 64 true values at ``max_t`` (1: the
    truly best trial), ``best_true_value`` its true final value; ``trials_on_rung``: the
    trials whose last iteration is a rung (exactness: all of them); ``ideal_s``: the
    steps' own time spread over the concurrency (the limit after Ray is up)."""
    curves = spec["curves"]
    iterations = [int(r.get("training_iteration") or 0) for r in lasts]
    ok = len(lasts) == len(curves) and errors == 0 and min(iterations, default=0) >= 1
    ok = ok and max(iterations, default=0) <= MAX_T and best is not None
    return {
        "ok": ok,
        "trials": len(lasts),
        "errors": errors,
        "iterations": sum(iterations),
        "max_iteration": max(iterations, default=0),
        "trials_at_max_t": sum(1 for i in iterations if i >= MAX_T),
        "trials_on_rung": sum(1 for i in iterations if i in RUNGS),
        "ideal_s": sum(iterations) * spec["step_s"] / spec["concurrency"],
        "best_index": best,
        "best_true_value": curve_value(curves[best], MAX_T) if best is not None else None,
        "best_true_rank": true_rank(curves, best) if best is not None else None,
        **_times(t0, t_ray, t_end, t_exit),
    }


def pbt_figures(
    spec: Mapping[str, Any],
    *,
    t0: float,
    t_ray: float,
    t_end: float,
    t_exit: float,
    lasts: Sequence[Mapping[str, Any]],
    exploits: int | None,
    errors: Sequence[str],
    log_dir: str,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``best_accuracy``: the best final ``mean_accuracy`` among the trials (each judged
    by its last result); ``exploits``: the scheduler's own count; ``latencies``: one
    entry per exploit seen in the trainables' event log (see ``_sched_common``),
    ``own_checkpoint_loads``: restores of a trial from its own checkpoint, and
    their medians ``latency_s``, ``to_load_s`` (last result before the exploit to the
    checkpoint's load), ``config_to_load_s`` and ``load_to_result_s`` (see
    ``exploit_latencies``); ``rollback_exploits``: exploits of a donor's checkpoint older
    than the trial's last result. ``start_spread_s``: from the first
    trial's first event to the last trial's (how staggered the population starts);
    ``all_running_s``: how long all trials were running together (negative: the first
    ended before the last began): PBT ranks a trial among the trials running."""
    accuracies = [r["mean_accuracy"] for r in lasts if "mean_accuracy" in r]
    iterations = [int(r.get("training_iteration") or 0) for r in lasts]
    finished = all(
        i >= spec["iterations"] or r.get("done") for i, r in zip(iterations, lasts, strict=True)
    )
    latencies, own_loads = exploit_latencies(log_dir)
    events = read_events(log_dir).values()
    starts = [e[0][0] for e in events if e]
    ends = [e[-1][0] for e in events if e]

    def med(key: str) -> float | None:
        values = [e[key] for e in latencies if e.get(key) is not None]
        return statistics.median(values) if values else None

    figures: dict[str, Any] = {
        "ok": len(lasts) == spec["trials"] and not errors and finished,
        "trials": len(lasts),
        "errors": len(errors),
        "error_messages": list(errors)[:5],
        "best_accuracy": max(accuracies) if accuracies else None,
        "iterations": sum(iterations),
        "exploits": exploits,
        "exploits_logged": len(latencies),
        "own_checkpoint_loads": own_loads,
        "latency_s": med("latency_s"),
        "to_load_s": med("to_load_s"),
        "load_to_result_s": med("load_to_result_s"),
        "config_to_load_s": med("config_to_load_s"),
        "rollback_exploits": sum(1 for e in latencies if e.get("rollback")),
        "latency_paths": sorted({e["path"] for e in latencies}),
        "start_spread_s": max(starts) - min(starts) if starts else None,
        "all_running_s": min(ends) - max(starts) if starts else None,
        "latencies": [
            {
                k: e.get(k)
                for k in (
                    "latency_s",
                    "to_load_s",
                    "config_to_load_s",
                    "load_to_result_s",
                    "path",
                    "rollback",
                )
            }
            for e in latencies
        ],
        **_times(t0, t_ray, t_end, t_exit),
    }
    if extra:
        figures.update(extra)
    return figures
