"""The median stopping rule (Golovin et al., "Google Vizier", KDD 2017).

Stop a trial once its best score so far is worse than the median of the other trials'
running means at the same point in time. Ray Tune's MedianStoppingRule semantics; each
trial's history is kept as prefix sums, so a running mean over any window costs two
binary searches and a decision costs O(trials) (plus sorting their means for the median).

The prefix sums are exact: integers counting units of ``2**-scale``, where ``scale`` is
the finest binary exponent among the trial's scores (every float is an integer times a
power of two), and a mean is one correctly rounded integer division. A float prefix sum
rounds, and the difference of two rounded sums is no longer the window's mean: a single
0.3 after a 0.1 came out as 0.30000000000000004, so a trial equal to the median was
"strictly worse" than it and stopped. Exact means give equal inputs equal means, which is
what the strictly-worse rule needs; a tolerance would instead make genuinely different
values tie. The integers stay small for ordinary scores (``scale`` is about 60 for
values near 1e-3) and grow only with a trial's finest exponent.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.schedulers.base import (
    Decision,
    Pause,
    Population,
    Resume,
    Scheduler,
    Stop,
    TrialInfo,
    check_number,
)


def _scaled(score: float) -> tuple[int, int]:
    """``score`` as ``(n, e)`` with ``score == n * 2**-e`` exactly (``e >= 0``)."""
    numerator, denominator = score.as_integer_ratio()
    return numerator, denominator.bit_length() - 1


@dataclass
class _History:
    """One trial's scores by time, as exact prefix sums of its finite scores (in units of
    ``2**-scale``; see the module docstring), -inf and +inf counted apart."""

    times: list[float] = field(default_factory=list)
    sums: list[int] = field(default_factory=lambda: [0])
    worst: list[int] = field(default_factory=lambda: [0])  # cumulative count of -inf
    best_inf: list[int] = field(default_factory=lambda: [0])  # cumulative count of +inf
    best: float = -math.inf
    scale: int = 0

    def add(self, time: float, score: float) -> None:
        units = 0
        if math.isfinite(score):
            numerator, exponent = _scaled(score)
            if exponent > self.scale:  # a finer score: re-express the sums (rare)
                shift = exponent - self.scale
                self.sums = [total << shift for total in self.sums]
                self.scale = exponent
            units = numerator << (self.scale - exponent)
        self.times.append(time)
        self.sums.append(self.sums[-1] + units)
        self.worst.append(self.worst[-1] + (score == -math.inf))
        self.best_inf.append(self.best_inf[-1] + (score == math.inf))
        self.best = max(self.best, score)

    def mean(self, start: float, end: float) -> float | None:
        """The mean score over results with start <= time <= end, correctly rounded
        (None: no result there)."""
        lo = bisect.bisect_left(self.times, start)
        hi = bisect.bisect_right(self.times, end)
        if hi <= lo:
            return None
        if self.worst[hi] - self.worst[lo]:
            return -math.inf  # a NaN (or worst-infinite) value: the worst mean there is
        if self.best_inf[hi] - self.best_inf[lo]:
            return math.inf
        # int / int is correctly rounded in Python, however large the integers.
        return (self.sums[hi] - self.sums[lo]) / ((hi - lo) << self.scale)

    def to_list(self) -> list[Any]:
        return [self.times, self.sums, self.worst, self.best_inf, self.best, self.scale]

    @classmethod
    def from_list(cls, data: list[Any]) -> _History:
        if len(data) == 5:  # an older state: float prefix sums, taken at their exact value
            times, floats, worst, best_inf, best = data
            exact = [_scaled(t) if math.isfinite(t) else (0, 0) for t in floats]
            scale = max((e for _, e in exact), default=0)
            sums = [n << (scale - e) for n, e in exact]
            return cls(list(times), sums, list(worst), list(best_inf), best, scale)
        times, sums, worst, best_inf, best, scale = data
        return cls(list(times), list(sums), list(worst), list(best_inf), best, scale)


class MedianStopping(Scheduler):
    """The median stopping rule, with Ray Tune's MedianStoppingRule's arguments.

    Once a result's ``time_attr`` value ``t`` is at least ``grace_period``, the trial is
    stopped (paused with ``hard_stop=False``) when its best score so far is strictly worse
    than the median of the running means of the *other* trials that have reached ``t``.
    A running mean is over that trial's results with ``grace_period <= time <= t`` (Ray
    Tune's window: early, noisy results do not count); a NaN in the window makes it the
    worst mean. With fewer than ``min_samples_required`` such means: Continue.

    A trial is decided once: later results of a stopped trial get Stop again, and a
    paused one is left alone if somebody resumes it. ``on_idle`` resumes the trials this
    rule paused (nothing else is left to run: Ray Tune then runs them FIFO too).

    ``grace_period`` defaults to 5.0 rather than Ray Tune's 60.0 because ``time_attr``
    defaults to ``training_iteration`` here, not seconds: 60 iterations would exceed many
    whole sweeps, while five give every trial a few results to average before its first
    comparison and still leave most of a typical tens-of-iterations run to save.
    """

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        grace_period: float = 5.0,
        min_samples_required: int = 3,
        hard_stop: bool = True,
    ) -> None:
        super().__init__(time_attr, metric, mode)
        check_number("grace_period", grace_period, lambda v: 0 <= v < math.inf, "a number >= 0")
        check_number(
            "min_samples_required",
            min_samples_required,
            lambda v: isinstance(v, int) and v >= 1,
            "a positive integer",
        )
        self.grace_period = grace_period
        self.min_samples_required = min_samples_required
        self.hard_stop = hard_stop
        self._histories: dict[str, _History] = {}
        self._stopped: set[str] = set()
        self._paused: set[str] = set()  # paused by this rule, not resumed yet
        self._decided: set[str] = set()  # never evaluated again

    def on_trial_result(
        self, trial: TrialInfo, result: Mapping[str, Any], population: Population
    ) -> list[Decision]:
        time, score = self._time_of(result), self._score_of(result)
        if time is None or score is None:
            return []
        tid = trial.trial_id
        if tid in self._stopped:
            return [Stop(tid)]  # its earlier decision stands
        history = self._histories.setdefault(tid, _History())
        if history.times and time <= history.times[-1]:
            return []  # re-reported after a restart: it continued from here before
        history.add(time, score)
        if tid in self._decided or time < self.grace_period:
            return []
        median = self._median_score(time, exclude=tid)
        if median is None or not history.best < median:
            return []
        self._decided.add(tid)
        if self.hard_stop:
            self._stopped.add(tid)
            return [Stop(tid)]
        self._paused.add(tid)
        return [Pause(tid)]

    def on_trial_complete(
        self, trial: TrialInfo, result: Mapping[str, Any] | None, population: Population
    ) -> list[Decision]:
        """Keep the final result: it counts in the others' medians."""
        time, score = self._time_of(result), self._score_of(result)
        if time is not None and score is not None:
            history = self._histories.setdefault(trial.trial_id, _History())
            if not history.times or time > history.times[-1]:
                history.add(time, score)
        self._paused.discard(trial.trial_id)
        return []

    def on_trial_error(self, trial: TrialInfo, population: Population) -> list[Decision]:
        self._paused.discard(trial.trial_id)
        return []

    def on_idle(self, population: Population) -> list[Decision]:
        """Resume the trials this rule paused: nobody else is left to use the resources."""
        out: list[Decision] = []
        for tid in sorted(self._paused):
            info = population.get(tid)
            if info is None or info.state in ("TERMINATED", "ERROR"):
                self._paused.discard(tid)
            elif info.state == "PAUSED":
                self._paused.discard(tid)
                out.append(Resume(tid))
        return out

    def median_at(self, time: float, exclude: str | None = None) -> float | None:
        """The median running mean at ``time`` (metric units) of the trials other than
        ``exclude`` that have reached it; None with fewer than min_samples_required."""
        median = self._median_score(time, exclude)
        return median if median is None or self.mode == "max" else -median

    def _median_score(self, time: float, exclude: str | None) -> float | None:
        means = []
        for tid, history in self._histories.items():
            if tid == exclude or history.times[-1] < time:
                continue
            mean = history.mean(self.grace_period, time)
            if mean is not None:
                means.append(mean)
        if len(means) < self.min_samples_required:
            return None
        return statistics.median(means)

    def next_decision_at(self, trial: TrialInfo) -> float | None:
        if trial.trial_id in self._decided:
            return None
        current = self._current_time(trial)
        return current + 1 if current >= self.grace_period else self.grace_period

    def state_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "mode": self.mode,
            "histories": {tid: h.to_list() for tid, h in self._histories.items()},
            "stopped": sorted(self._stopped),
            "paused": sorted(self._paused),
            "decided": sorted(self._decided),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.metric, self.mode = state["metric"], state["mode"]
        self._histories = {tid: _History.from_list(h) for tid, h in state["histories"].items()}
        self._stopped = set(state["stopped"])
        self._paused = set(state["paused"])
        self._decided = set(state["decided"])
