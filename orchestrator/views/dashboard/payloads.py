"""What the pages are sent: plain data built from a :class:`JournalTail`.

An experiment's payload holds its summary, one row per trial (state, iteration, the
chosen metric's value, its config flattened to ``a/b`` keys, its error), the curves of
the chosen metric against the chosen x (per trial, one point per result, so that a page
can replace a trial's points from a result index on), PBT's lineage and the
scheduler's stops. A *delta* has the same shape, holding only what changed since a
version the page has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from orchestrator.core.results import flatten
from orchestrator.views.dashboard.json_values import finite, lookup, newest, numbers, spell
from orchestrator.views.dashboard.tail import Change, JournalTail

__all__ = [
    "DEFAULT_X",
    "delta",
    "experiment",
    "objective",
    "summary",
]

DEFAULT_X = "training_iteration"
#: Keys every result carries that are seldom what a user ranks by.
BOOKKEEPING = frozenset(
    {
        "training_iteration",
        "time_this_iter_s",
        "time_total_s",
        "timestamp",
        "trial_id",
        "iterations_since_restore",
        "done",
        "t",
    }
)
TERMINAL = frozenset({"TERMINATED", "ERROR"})
#: The (metric, x) pairs whose curves are kept computed.
MEMO_PAIRS = 4
#: Config and metric keys shown at most (a result with thousands of keys stays usable).
MAX_KEYS = 200


def objective(tail: JournalTail) -> tuple[str, str] | None:
    """``(metric, mode)`` of the first sweep that names both, else None."""
    for sweep in _sweeps(tail):
        if isinstance(sweep.get("metric"), str) and sweep.get("mode") in ("max", "min"):
            return sweep["metric"], sweep["mode"]
    return None


def summary(name: str, tail: JournalTail) -> dict[str, Any]:
    """One line of the experiments page (it reads heads only: no results needed)."""
    states: dict[str, int] = {}
    for entry in tail.entries.values():
        state = str(entry.get("state", "UNKNOWN"))
        states[state] = states.get(state, 0) + 1
    best = metric = mode = None
    chosen = objective(tail)
    if chosen is not None:
        metric, mode = chosen
        best = _best(tail, tail.entries, metric, mode)
    header = tail.header
    return {
        "name": name,
        "uri": tail.uri,
        "trials": len(tail.entries),
        "states": dict(sorted(states.items())),
        "metric": metric,
        "mode": mode,
        "best": best,
        "started_at": _number(header.get("started_at")),
        "written_at": _number(header.get("written_at")),
        "running": any(s not in TERMINAL for s in states),
        "problem": tail.problem,
        "version": tail.version,
    }


def experiment(
    name: str, tail: JournalTail, metric: str | None, mode: str | None, x: str
) -> dict[str, Any]:
    """Everything one experiment's page shows, for ``metric`` (None: the sweep's, else
    the first the trials report) and ``mode`` (None: the sweep's for that metric, else
    none: then no trial is called best, since "best" by a guessed direction would call
    the highest loss best)."""
    metric, mode = _chosen(tail, metric, mode)
    return {
        "summary": summary(name, tail),
        "metric": metric,
        "mode": mode,
        "x": x,
        "metrics": _metric_keys(tail),
        "config_keys": _config_keys(tail.entries.values()),
        "order": list(tail.entries),
        "trials": [_row(tail, t, metric) for t in tail.entries],
        "series": {t: _points(tail, t, metric, x, 0) for t in tail.entries},
        "best": _best(tail, tail.entries, metric, mode) if metric and mode else None,
        **_extras(tail),
    }


def delta(
    name: str, tail: JournalTail, change: Change, metric: str | None, mode: str | None, x: str
) -> dict[str, Any]:
    """What changed in ``change``, shaped like :func:`experiment` (``series`` holds each
    changed trial's points from index ``from`` on; the page drops its points from there)."""
    metric, mode = _chosen(tail, metric, mode)
    trials = [t for t in tail.entries if t in change.trials or t in change.results]
    payload: dict[str, Any] = {
        "summary": summary(name, tail),
        "trials": [_row(tail, t, metric) for t in trials],
        "series": {
            t: _points(tail, t, metric, x, first)
            for t, first in change.results.items()
            if t in tail.entries
        },
        "best": _best(tail, tail.entries, metric, mode) if metric and mode else None,
    }
    if change.header or change.trials:
        payload["order"] = list(tail.entries)
        payload["metrics"] = _metric_keys(tail)
        payload["config_keys"] = _config_keys(tail.entries.values())
        payload.update(_extras(tail))
    return payload


# -- trials ----------------------------------------------------------------------------


def _row(tail: JournalTail, trial_id: str, metric: str | None) -> dict[str, Any]:
    entry = tail.entries[trial_id]
    now = entry.get("config_now")
    config = now if isinstance(now, Mapping) else entry.get("config")
    results = tail.results(trial_id)
    last = results[-1] if results else entry.get("last_result")
    return {
        "id": trial_id,
        "state": str(entry.get("state", "UNKNOWN")),
        "iteration": _int(entry.get("iteration")) or _int((last or {}).get("training_iteration")),
        "failures": _int(entry.get("num_failures")),
        "error": entry.get("error") if isinstance(entry.get("error"), str) else None,
        "results": len(results) if tail.loaded else _int(entry.get("results_count")),
        "config": {k: spell(v) for k, v in flatten(config).items()}
        if isinstance(config, Mapping)
        else {},
        "value": spell(_standing(tail, trial_id, metric)) if metric else None,
    }


def _standing(tail: JournalTail, trial_id: str, metric: str) -> Any:
    """The trial's value of ``metric``: its newest result that reports it (the head's
    last result when results are not read)."""
    if tail.loaded:
        return newest(tail.results(trial_id), metric)
    last = tail.entries[trial_id].get("last_result")
    return lookup(last, metric) if isinstance(last, Mapping) else None


def _best(
    tail: JournalTail, trials: Iterable[str], metric: str, mode: str
) -> dict[str, Any] | None:
    """The trial whose value of ``metric`` is best; a NaN or infinite value never
    counts; the first of equals wins."""
    sign = 1.0 if mode == "max" else -1.0
    best: tuple[float, str] | None = None
    for trial_id in trials:
        value = finite(_standing(tail, trial_id, metric))
        if value is not None and (best is None or sign * value > sign * best[0]):
            best = (value, trial_id)
    if best is None:
        return None
    entry = tail.entries[best[1]]
    config = entry.get("config_now") or entry.get("config") or {}
    return {"trial": best[1], "value": best[0], "metric": metric, "mode": mode, "config": config}


def _points(
    tail: JournalTail, trial_id: str, metric: str | None, x: str, first: int
) -> dict[str, Any]:
    """Each of the trial's results' ``(x, metric)`` from index ``first`` on; null where
    a result lacks either or holds no finite number. A trial's whole curve is computed
    once per change of its results (pages that open meanwhile reuse it)."""
    results = tail.results(trial_id)
    if first:
        rows = results[first:]
        ys = numbers(rows, metric) if metric else [None] * len(rows)
        return {"from": first, "x": numbers(rows, x), "y": ys}
    curves = tail.memo.pop((metric, x), None) or {}
    tail.memo[(metric, x)] = curves  # the newest pair last
    while len(tail.memo) > MEMO_PAIRS:
        del tail.memo[next(iter(tail.memo))]
    stamp = tail.stamp(trial_id)
    memo = curves.get(trial_id)
    if memo is None or memo[0] != stamp:
        ys = numbers(results, metric) if metric else [None] * len(results)
        memo = curves[trial_id] = (stamp, {"from": 0, "x": numbers(results, x), "y": ys})
    points: dict[str, Any] = memo[1]
    return points


# -- keys ------------------------------------------------------------------------------


def _chosen(
    tail: JournalTail, metric: str | None, mode: str | None
) -> tuple[str | None, str | None]:
    """The metric shown and the mode that ranks it: those asked for, else the sweep's; a
    metric no sweep ranks has no mode until the page picks one (never a guess)."""
    sweep = objective(tail)
    if metric is None:
        if sweep is not None:
            metric = sweep[0]
        else:
            metric = next((k for k in _metric_keys(tail) if k not in BOOKKEEPING), None)
    if mode not in ("max", "min"):
        mode = sweep[1] if sweep is not None and sweep[0] == metric else None
    return metric, mode


def _metric_keys(tail: JournalTail) -> list[str]:
    """The numeric keys trials report (nested ones as ``a/b``), from each trial's first
    and last result (every result would cost a pass over all of them)."""
    keys: dict[str, None] = {}
    for trial_id, entry in tail.entries.items():
        results = tail.results(trial_id)
        samples = [results[0], results[-1]] if results else [entry.get("last_result")]
        for sample in samples:
            if isinstance(sample, Mapping):
                for key, value in flatten(sample).items():
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        keys.setdefault(key)
        if len(keys) >= MAX_KEYS:
            break
    return sorted(keys)


def _config_keys(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    keys: dict[str, None] = {}
    for entry in entries:
        now = entry.get("config_now")
        config = now if isinstance(now, Mapping) else entry.get("config")
        if isinstance(config, Mapping):
            keys.update(dict.fromkeys(flatten(config)))
        if len(keys) >= MAX_KEYS:
            break
    return list(keys)[:MAX_KEYS]


# -- the sweeps' records ---------------------------------------------------------------


def _sweeps(tail: JournalTail) -> list[Mapping[str, Any]]:
    sweeps = tail.header.get("sweeps")
    return [s for s in sweeps if isinstance(s, Mapping)] if isinstance(sweeps, list) else []


def _extras(tail: JournalTail) -> dict[str, Any]:
    """PBT's lineage (who cloned whom, when, with which config) and the scheduler's
    stops (each trial's ``stop`` events, and ASHA's rungs)."""
    lineage = []
    for sweep in _sweeps(tail):
        for exploit in sweep.get("lineage") or []:
            if isinstance(exploit, Mapping):
                old, new = exploit.get("old_config"), exploit.get("new_config")
                lineage.append(
                    {
                        "trial": str(exploit.get("trial_id", "?")),
                        "time": exploit.get("time"),
                        "donor": str(exploit.get("donor_id", "?")),
                        "donor_iteration": exploit.get("donor_checkpoint_iteration"),
                        "changes": _changes(old, new),
                        "config": flatten(new) if isinstance(new, Mapping) else {},
                    }
                )
    stops = []
    for trial_id, entry in tail.entries.items():
        for event in entry.get("events") or []:
            if isinstance(event, Mapping) and event.get("kind") == "stop":
                stops.append({"trial": trial_id, **{k: v for k, v in event.items() if k != "kind"}})
    rungs = [s["rungs"] for s in _sweeps(tail) if isinstance(s.get("rungs"), list)]
    return {"lineage": lineage, "stops": stops, "rungs": rungs[0] if rungs else []}


def _changes(old: Any, new: Any) -> dict[str, list[Any]]:
    """``key -> [before, after]`` for each config key the exploit changed."""
    before = flatten(old) if isinstance(old, Mapping) else {}
    after = flatten(new) if isinstance(new, Mapping) else {}
    return {
        k: [before.get(k), after.get(k)]
        for k in dict.fromkeys([*before, *after])
        if before.get(k) != after.get(k)
    }


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _number(value: Any) -> float | None:
    return finite(value)
