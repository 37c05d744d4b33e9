"""One picture of an experiment: every trial's metric against its training iteration,
the best trial emphasised, and its restores, exploits and failures marked.

The figure is a :class:`matplotlib.figure.Figure` made without pyplot (no global state,
no GUI backend; PNGs are written with Agg), so plotting is safe in a server, a thread or
a test. matplotlib is imported only when :func:`plot_metric` is called.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.core.best import pick_best, value_of
from orchestrator.core.results import flatten
from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["EVENT_MARKERS", "plot_metric"]

#: The marker of each event kind; another kind is drawn with ``"D"`` under its own name.
EVENT_MARKERS: Mapping[str, str] = {"restore": "o", "exploit": "^", "failure": "X"}
BEST_LINEWIDTH = 2.8
LINEWIDTH = 1.0
_MAX_KEYS_NAMED = 40


def plot_metric(
    trials: Sequence[Mapping[str, Any]],
    metric: str,
    mode: str | None = None,
    *,
    path: str | None = None,
    title: str | None = None,
) -> Figure:
    """Plot ``metric`` against ``training_iteration``, one line per trial.

    Each trial is a mapping with ``"id"``, ``"results"`` (result dicts with
    ``training_iteration``; a nested metric is named with ``/``, e.g. ``"eval/acc"``),
    and optionally ``"state"`` (an ``ERROR`` trial's line is dashed) and ``"events"``
    (``{"kind": "restore" | "exploit" | "failure", "iteration": k, ...}``). A trial
    without the metric is skipped. The best trial (:mod:`orchestrator.core.best`: by its
    newest value, NaN and infinities never best; ``mode`` "max" or "min", None meaning
    "max"), is drawn ``BEST_LINEWIDTH`` wide and labelled.

    Each trial's line is the one :class:`~matplotlib.lines.Line2D` whose ``gid`` is the
    trial id; each event kind is one scatter collection (a legend entry) with a point
    at (event iteration, the trial's last finite value at or before it). Writes a PNG at ``path``
    when given. Raises ``ConfigError`` if no trial reported ``metric`` (naming the keys
    they did report) or matplotlib is missing.
    """
    if mode not in (None, "max", "min"):
        raise ConfigError(f"mode must be 'max', 'min' or None, got {mode!r}")
    try:
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ConfigError("plot needs matplotlib: pip install 'trialflow[cli]'") from err

    series = {}
    for trial in trials:
        points = _points(trial.get("results") or (), metric)
        if points:
            series[str(trial["id"])] = (trial, points)
    if not series:
        keys = sorted({k for t in trials for r in t.get("results") or () for k in flatten(r)})
        named = ", ".join(keys[:_MAX_KEYS_NAMED]) + (", ..." if len(keys) > _MAX_KEYS_NAMED else "")
        raise ConfigError(
            f"no trial reported the metric {metric!r}; the trials reported: {named or 'nothing'}"
        )
    best, best_value = _best(series, metric, mode or "max")

    figure = Figure(figsize=(9, 5.5), layout="constrained")
    axes = figure.add_subplot()
    for trial_id, (trial, points) in series.items():
        xs, ys = zip(*points, strict=True)
        is_best = trial_id == best
        axes.plot(
            xs,
            ys,
            gid=trial_id,
            linewidth=BEST_LINEWIDTH if is_best else LINEWIDTH,
            alpha=1.0 if is_best else 0.55,
            linestyle="--" if str(trial.get("state", "")).endswith("ERROR") else "-",
            color="black" if is_best else None,
            zorder=3 if is_best else 2,
            label=f"best: {trial_id} ({metric}={best_value:.4g})" if is_best else "_nolegend_",
        )
    _mark_events(axes, series)
    axes.set_xlabel("training_iteration")
    axes.set_ylabel(metric)
    axes.set_title(title or f"{metric} of {len(series)} trials ({mode or 'max'} is best)")
    axes.grid(True, alpha=0.3)
    axes.legend(loc="best")
    if path is not None:
        figure.savefig(path, format="png", dpi=100)
    return figure


def _value(result: Mapping[str, Any], metric: str) -> float | None:
    value: Any = result.get(metric)
    if value is None and "/" in metric:
        value = result
        for part in metric.split("/"):
            value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _points(results: Sequence[Mapping[str, Any]], metric: str) -> list[tuple[int, float]]:
    points = []
    for result in results:
        value = _value(result, metric)
        iteration = result.get("training_iteration")
        if value is not None and isinstance(iteration, int):
            points.append((iteration, value))
    return points


def _best(
    series: Mapping[str, tuple[Any, list[tuple[int, float]]]], metric: str, mode: str
) -> tuple[str | None, float]:
    """The best trial and its value, by the rule of :mod:`orchestrator.core.best` (the one
    the progress table, ``SweepResult`` and ``show`` use); ``(None, nan)``: none."""
    candidates = (
        (trial_id, value_of(trial.get("results") or (), metric))
        for trial_id, (trial, _) in series.items()
    )
    found = pick_best(candidates, mode)
    return found if found is not None else (None, math.nan)


def _at(points: list[tuple[int, float]], iteration: int) -> float:
    """The trial's last finite value at or before ``iteration``, else its first finite
    value (an event before the first result), so a marker always sits on the line."""
    finite = [(it, v) for it, v in points if math.isfinite(v)] or points
    value = finite[0][1]
    for it, v in finite:
        if it > iteration:
            break
        value = v
    return value


def _mark_events(axes: Axes, series: Mapping[str, tuple[Any, list[tuple[int, float]]]]) -> None:
    marks: dict[str, list[tuple[int, float]]] = {}
    for trial, points in series.values():
        for event in trial.get("events") or ():
            iteration = event.get("iteration")
            if isinstance(iteration, int):
                kind = str(event.get("kind"))
                marks.setdefault(kind, []).append((iteration, _at(points, iteration)))
    for kind, xy in sorted(marks.items()):
        xs, ys = zip(*xy, strict=True)
        axes.scatter(
            xs,
            ys,
            marker=EVENT_MARKERS.get(kind, "D"),
            s=48,
            zorder=4,
            label=f"{kind} ({len(xy)})",
            gid=f"event:{kind}",
            edgecolors="black",
            linewidths=0.6,
        )
