"""What "best" means, defined once: the live progress table, :class:`SweepResult`,
``show``, ``ls`` and ``plot`` all rank trials with these functions. Sans-IO.

A trial's value of a metric is the one held by its newest result that reports the
metric (Ray Tune's "last" scope: a result without the key leaves the value as it was).
A value that is not a finite number never counts as best: a trial whose value is NaN or
infinite has no standing, like a trial that never reported the metric, and its earlier
values do not stand in for it (it diverged; Ray Tune filters NaN and inf the same way).
With ``scope="all"`` a trial stands by its best finite value over all its results. Ties
go to the trial listed first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar

__all__ = ["finite", "has_metric", "lookup", "number", "pick_best", "standing", "value_of"]

T = TypeVar("T")


def lookup(result: Mapping[str, Any] | None, metric: str) -> Any:
    """``result[metric]``, or for ``"a/b"`` (when there is no such key) the nested
    ``result["a"]["b"]``; None when absent."""
    if not result:
        return None
    value = result.get(metric)
    if value is None and "/" in metric:
        value = result
        for part in metric.split("/"):
            value = value.get(part) if isinstance(value, Mapping) else None
    return value


def has_metric(result: Mapping[str, Any], metric: str) -> bool:
    """The result reports ``metric`` (see :func:`lookup`), whatever its value."""
    return metric in result or ("/" in metric and lookup(result, metric) is not None)


def number(value: Any) -> float | None:
    """``value`` as a float when it is a real number (not a bool), finite or not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def metric_value(result: Mapping[str, Any] | None, metric: str) -> float | None:
    """``result[metric]`` (see :func:`lookup`) as a float, NaN and infinities as they
    are; None when absent or not a number."""
    return number(lookup(result, metric))


def finite_metric(result: Mapping[str, Any] | None, metric: str) -> float | None:
    """``result[metric]`` (see :func:`lookup`) when it is a finite number, else None."""
    return finite(lookup(result, metric))


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite real number (not a bool), else None."""
    n = number(value)
    return n if n is not None and math.isfinite(n) else None


def value_of(results: Sequence[Mapping[str, Any]], metric: str) -> Any:
    """The trial's value of ``metric``: what its newest result reporting it holds (as
    reported: NaN, a string...), or None when no result reports it."""
    for result in reversed(results):
        value = lookup(result, metric)
        if value is not None:
            return value
    return None


def standing(
    results: Sequence[Mapping[str, Any]],
    metric: str,
    mode: str,
    scope: Literal["last", "all"] = "last",
) -> float | None:
    """The finite value a trial is ranked by, or None: it cannot be the best."""
    if scope == "last":
        return finite(value_of(results, metric))
    values = [v for r in results if (v := finite(lookup(r, metric))) is not None]
    if not values:
        return None
    return max(values) if mode == "max" else min(values)


def pick_best(candidates: Iterable[tuple[T, Any]], mode: str) -> tuple[T, float] | None:
    """The candidate with the best finite value (``mode`` "max" or "min"; the first of
    equals), with that value; None when no value is a finite number."""
    sign = 1.0 if mode == "max" else -1.0
    best: tuple[T, float] | None = None
    for item, value in candidates:
        score = finite(value)
        if score is not None and (best is None or sign * score > sign * best[1]):
            best = (item, score)
    return best
