"""Ray Tune's stoppers (``ray.tune.stopper``), and how ``RunConfig(stop=...)`` maps onto
the engine.

:func:`plan_stop` splits what the user gave into three parts:

- the engine's own stop criterion (a dict of thresholds, or a pure function), which
  the trial's actor checks too, so a trial stops exactly where it should even when it
  runs several steps per call: a dict (``True`` counts as 1), a plain function,
  ``MaximumIterationStopper`` and ``FunctionStopper``; and always ``{"done": 1}``, since
  a result with ``done=True`` ends its trial, as in Tune;
- a stopper that keeps state across results or trials (``TrialPlateauStopper``,
  ``ExperimentPlateauStopper``, ``CombinedStopper``, a subclass of ``Stopper``): it runs
  in the driver only, on every result in order, through the sweep's scheduler
  (:mod:`orchestrator.tune.schedulers.base`), and its ``stop_all()`` ends the sweep;
- a time budget (``TimeoutStopper``, and ``TuneConfig(time_budget_s=...)``): a timer
  that ends the sweep when it expires.
"""

from __future__ import annotations

import datetime
import math
import statistics
import time
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.tune.error import unsupported

__all__ = [
    "CombinedStopper",
    "ExperimentPlateauStopper",
    "FunctionStopper",
    "MaximumIterationStopper",
    "Stopper",
    "StopPlan",
    "TimeoutStopper",
    "TrialPlateauStopper",
    "plan_stop",
]


class Stopper:
    """Ray Tune's ``Stopper``: ``__call__(trial_id, result)`` stops one trial,
    ``stop_all()`` the whole run. Called in the driver, on every result, in order."""

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must implement __call__")

    def stop_all(self) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must implement stop_all")


class MaximumIterationStopper(Stopper):
    """Stop each trial at ``max_iter`` iterations (the engine's exact
    ``training_iteration`` threshold: a restored trial counts from its checkpoint)."""

    def __init__(self, max_iter: int) -> None:
        self._max_iter = max_iter

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return bool(result.get("training_iteration", 0) >= self._max_iter)

    def stop_all(self) -> bool:
        return False


class FunctionStopper(Stopper):
    """A function ``(trial_id, result) -> bool`` as a stopper."""

    def __init__(self, function: Callable[[str, dict[str, Any]], bool]) -> None:
        self._fn = function

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return bool(self._fn(trial_id, result))

    def stop_all(self) -> bool:
        return False

    @classmethod
    def is_valid_function(cls, fn: Any) -> bool:
        return callable(fn) and not isinstance(fn, Stopper)


class TrialPlateauStopper(Stopper):
    """Stop a trial once the standard deviation of its last ``num_results`` values of
    ``metric`` is below ``std`` (after ``grace_period`` results; with
    ``metric_threshold``, only once the metric is past it in ``mode``)."""

    def __init__(
        self,
        metric: str,
        std: float = 0.01,
        num_results: int = 4,
        grace_period: int = 4,
        metric_threshold: float | None = None,
        mode: str | None = None,
    ) -> None:
        if metric_threshold is not None and mode not in ("min", "max"):
            raise ValueError(
                f"TrialPlateauStopper: with a metric_threshold, mode must be 'min' or 'max', "
                f"got {mode!r}"
            )
        self._metric, self._std, self._mode = metric, std, mode
        self._num_results, self._grace_period = num_results, grace_period
        self._threshold = metric_threshold
        self._iter: defaultdict[str, int] = defaultdict(int)
        self._results: dict[str, deque[Any]] = {}

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        value = result.get(self._metric)
        window = self._results.setdefault(trial_id, deque(maxlen=self._num_results))
        window.append(value)
        self._iter[trial_id] += 1
        if self._iter[trial_id] < self._grace_period or len(window) < self._num_results:
            return False
        if self._threshold is not None and isinstance(value, (int, float)):
            if (self._mode == "min" and value > self._threshold) or (
                self._mode == "max" and value < self._threshold
            ):
                return False
        try:
            spread = statistics.pstdev(float(v) for v in window)
        except (TypeError, ValueError):
            spread = math.inf
        return spread < self._std

    def stop_all(self) -> bool:
        return False


class ExperimentPlateauStopper(Stopper):
    """Stop the whole run once the ``top`` best values of ``metric`` over all results
    have a standard deviation of at most ``std``, for ``patience`` results in a row."""

    def __init__(
        self, metric: str, std: float = 0.001, top: int = 10, mode: str = "min", patience: int = 0
    ) -> None:
        if mode not in ("min", "max"):
            raise ValueError("The mode parameter can only be either min or max.")
        if not isinstance(top, int) or top <= 1:
            raise ValueError("Top results to consider must be a positive integer greater than one.")
        if not isinstance(patience, int) or patience < 0:
            raise ValueError("Patience must be a strictly positive integer.")
        if not isinstance(std, float) or std <= 0:
            raise ValueError("The standard deviation must be a strictly positive float number.")
        self._metric, self._std, self._top, self._mode = metric, std, top, mode
        self._patience = patience
        self._iterations = 0
        self._top_values: list[float] = []

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self._top_values.append(result[self._metric])
        ordered = sorted(self._top_values)
        self._top_values = ordered[: self._top] if self._mode == "min" else ordered[-self._top :]
        self._iterations = self._iterations + 1 if self.has_plateaued() else 0
        return self.stop_all()

    def has_plateaued(self) -> bool:
        return (
            len(self._top_values) == self._top and statistics.pstdev(self._top_values) <= self._std
        )

    def stop_all(self) -> bool:
        return self.has_plateaued() and self._iterations >= self._patience


class TimeoutStopper(Stopper):
    """End the whole run ``timeout`` seconds (or a ``timedelta``) after it starts: a
    timer here, so the run ends on time even when no result arrives.

    As on Tune, the stopper keeps a *budget*, spent between two ``stop_all()`` calls:
    pickled and loaded later (a restored run), it goes on with what was left, and the
    time it spent pickled is not counted (a clock reading does not survive a pickle).
    """

    def __init__(self, timeout: float | datetime.timedelta) -> None:
        if isinstance(timeout, datetime.timedelta):
            self.timeout_s = timeout.total_seconds()
        elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
            self.timeout_s = float(timeout)
        else:
            raise ValueError(
                "`timeout` parameter has to be either a number or a `datetime.timedelta` "
                f"object. Found: {type(timeout)}"
            )
        self.remaining_s = self.timeout_s
        self._last_check: float | None = None  # set by the first stop_all(): setup is free

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        now = time.monotonic()
        if self._last_check is not None:
            self.remaining_s -= now - self._last_check
        self._last_check = now
        return self.remaining_s <= 0

    @property
    def budget_left(self) -> float:
        """What is left of the budget, in seconds (0 once spent): the run's timer."""
        return max(self.remaining_s, 0.0)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_last_check": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("remaining_s", state.get("timeout_s", 0.0))
        self.__dict__.update(state)


class CombinedStopper(Stopper):
    """Several stoppers: a trial (or the run) stops when any of them says so."""

    def __init__(self, *stoppers: Stopper) -> None:
        self._stoppers = stoppers

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return any([s(trial_id, result) for s in self._stoppers])  # every one sees it

    def stop_all(self) -> bool:
        return any([s.stop_all() for s in self._stoppers])


# -- RunConfig(stop=...) as the engine takes it ---------------------------------------------


class DoneOr:
    """The engine's stop function for a function stop: ``done`` or the user's verdict.
    Picklable (it runs in the trial's actor too)."""

    def __init__(self, function: Callable[[str, dict[str, Any]], Any]) -> None:
        self.function = function

    def __call__(self, trial_id: str, result: Mapping[str, Any]) -> bool:
        return result.get("done") is True or bool(self.function(trial_id, dict(result)))


@dataclass(frozen=True)
class StopPlan:
    """``RunConfig(stop=...)`` split for the engine (see the module docstring)."""

    engine: Any  # the sweep's stop=: a dict or a function
    driver: Stopper | None  # runs on every result in the driver
    budget_s: float | None  # ends the run after this many seconds


def _thresholds(stop: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {"done": 1.0}
    for key, value in stop.items():
        if isinstance(value, bool):
            if not value:
                continue  # result[key] >= False holds for every result: Tune stops at once
            value = 1.0
        if not isinstance(value, (int, float)):
            raise unsupported(
                f"RunConfig(stop={{{key!r}: {value!r}}})",
                "give a number (a trial stops once result[key] >= it) or a function",
            )
        out[key] = float(value)
    return out


def plan_stop(stop: Any, time_budget_s: float | None = None) -> StopPlan:
    budget = float(time_budget_s) if time_budget_s is not None else None
    if stop is None:
        return StopPlan({"done": 1.0}, None, budget)
    if isinstance(stop, Mapping):
        return StopPlan(_thresholds(stop), None, budget)
    if isinstance(stop, MaximumIterationStopper):
        return StopPlan({"done": 1.0, "training_iteration": stop._max_iter}, None, budget)
    if isinstance(stop, FunctionStopper):
        return StopPlan(DoneOr(stop._fn), None, budget)
    if isinstance(stop, TimeoutStopper):
        return StopPlan({"done": 1.0}, None, _least(budget, stop.budget_left))
    if isinstance(stop, Stopper):
        timeouts = [s.budget_left for s in _leaves(stop) if isinstance(s, TimeoutStopper)]
        return StopPlan({"done": 1.0}, stop, _least(budget, *timeouts))
    if callable(stop):
        return StopPlan(DoneOr(stop), None, budget)
    raise unsupported(
        f"RunConfig(stop={type(stop).__name__})", "give a dict, a function or a tune.Stopper"
    )


def _leaves(stopper: Stopper) -> list[Stopper]:
    if isinstance(stopper, CombinedStopper):
        return [leaf for s in stopper._stoppers for leaf in _leaves(s)]
    return [stopper]


def _least(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None
