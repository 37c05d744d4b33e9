"""A trial's reported history as the loggers and trackers read it: the results a trial
holds, each one's ``training_iteration``, and what came before a given result (the
history a hook replays when it first sees a trial mid-run, e.g. after a driver restart).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["TRAINING_ITERATION", "history_before", "iteration_of", "results_of"]

TRAINING_ITERATION = "training_iteration"


def iteration_of(result: Mapping[str, Any] | None) -> int:
    """The result's ``training_iteration``; 0 for none, or one that is not an int."""
    value = (result or {}).get(TRAINING_ITERATION, 0)
    return value if type(value) is int else 0


def results_of(trial: Any) -> list[Mapping[str, Any]]:
    return list(getattr(trial, "results", None) or ())


def history_before(trial: Any, result: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The trial's results before ``result``: the one it holds (by identity), else those
    of a lower int ``training_iteration`` (all of them when ``result`` has none)."""
    results = results_of(trial)
    for index in range(len(results) - 1, -1, -1):
        if results[index] is result:
            return results[:index]
    iteration = result.get(TRAINING_ITERATION)
    if type(iteration) is not int:
        return results
    return [r for r in results if iteration_of(r) < iteration]
