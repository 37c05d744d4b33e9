"""Asynchronous successive halving (ASHA; Li et al., https://arxiv.org/abs/1810.05934).

Each trial belongs to one bracket; bracket ``s`` has rungs at
``grace_period * reduction_factor ** (k + s)`` for k = 0, 1, ... while below ``max_t``.
The first time a trial's result reaches a rung, its score is recorded there and it is
stopped unless it is in the top ``1 / reduction_factor`` of the scores recorded at that rung
so far (its own included). Nobody waits for anybody: that is what makes it asynchronous.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterable, Mapping
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.schedulers.base import (
    Decision,
    Population,
    Scheduler,
    SchedulerDisplay,
    Stop,
    TrialInfo,
    check_number,
    rng_state,
    set_rng_state,
)


def nanpercentile(values: Iterable[float], percent: float) -> float:
    """The ``percent``-th percentile of ``values``, NaNs ignored; NaN when none is left.

    The same definition as ``numpy.nanpercentile(values, percent)`` with the default
    linear interpolation (Hyndman & Fan type 7), computed the way numpy does it, so
    results agree to the last bit on finite values.
    """
    return _percentile_sorted(sorted(v for v in values if not math.isnan(v)), percent)


def _percentile_sorted(ordered: list[float], percent: float) -> float:
    n = len(ordered)
    if n == 0:
        return math.nan
    q = percent / 100.0
    h = (n - 1) * q  # numpy's virtual index for "linear"
    if h >= n - 1:
        return ordered[-1]
    if h < 0:
        return ordered[0]
    lo = math.floor(h)
    a, b, t = ordered[lo], ordered[lo + 1], h - lo
    if a == b or t == 0.0:
        return a
    if math.isinf(a) or math.isinf(b):  # the limit of the interpolation, not inf - inf
        return b if math.isinf(b) else a
    diff = b - a
    return b - diff * (1.0 - t) if t >= 0.5 else a + diff * t


class ASHA(Scheduler):
    """Asynchronous successive halving, with Ray Tune's AsyncHyperBandScheduler's arguments.

    Decisions: Stop a trial the first time it reaches a rung with a score below the rung's
    cutoff, and at ``max_t`` when ``stop_last_trials``; nothing otherwise (never Pause).

    The cutoff is the ``100 * (1 - 1/reduction_factor)``-th percentile of the scores
    recorded at the rung, the trial's own included (:func:`nanpercentile`; Ray Tune takes
    it over the values recorded before the trial's, then records it); scores are
    the metric, negated for mode "min", so "min" stops values above the
    ``100/reduction_factor``-th percentile of the raw values. Ties with the cutoff
    continue. A NaN metric ranks worst: it is stopped at any rung where some other trial
    has a real score, and leaves the percentile alone.

    A result that jumps over several rungs at once (a coarse ``time_attr``) is recorded at
    the highest of them only; the rungs below count as passed. So is a result at ``max_t``
    (stopped there with ``stop_last_trials``): it counts in the cutoff of the highest rung
    it passed, e.g. when the trial's results at the rungs lacked the metric.
    """

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        max_t: float = 100,
        grace_period: float = 1,
        reduction_factor: float = 4,
        brackets: int = 1,
        stop_last_trials: bool = True,
        seed: int | None = None,
    ) -> None:
        super().__init__(time_attr, metric, mode)
        check_number("max_t", max_t)
        check_number("grace_period", grace_period)
        if grace_period > max_t:
            raise ConfigError(
                f"grace_period ({grace_period!r}) must not exceed max_t ({max_t!r}): "
                "lower grace_period or raise max_t"
            )
        check_number(
            "reduction_factor",
            reduction_factor,
            lambda v: 1 < v < math.inf,
            "a number greater than 1",
        )
        if isinstance(brackets, bool) or not isinstance(brackets, int) or brackets < 1:
            raise ConfigError(f"brackets must be a positive integer, got {brackets!r}")
        self.max_t = max_t
        self.grace_period = grace_period
        self.reduction_factor = reduction_factor
        self.brackets = brackets
        self.stop_last_trials = stop_last_trials
        self._rng = random.Random(seed)
        self._milestones: list[list[float]] = [self._bracket_milestones(s) for s in range(brackets)]
        sizes = [len(m) for m in self._milestones]
        self._weights = [math.exp(size - max(sizes)) for size in sizes]  # Ray Tune's softmax
        # Per bracket, per rung: trial id -> score; and the scores (bar -inf) in order.
        self._records: list[list[dict[str, float]]] = [[{} for _ in m] for m in self._milestones]
        self._ordered: list[list[list[float]]] = [[[] for _ in m] for m in self._milestones]
        self._trials: dict[str, list[int]] = {}  # trial id -> [bracket, rungs passed]
        self._stopped: set[str] = set()

    def _bracket_milestones(self, s: int) -> list[float]:
        out: list[float] = []
        k = 0
        while (m := self.grace_period * self.reduction_factor ** (k + s)) < self.max_t:
            out.append(m)
            k += 1
        return out

    @property
    def rungs(self) -> list[list[float]]:
        """Each bracket's rung milestones, ascending (a copy)."""
        return [list(m) for m in self._milestones]

    def display(self) -> SchedulerDisplay:
        return SchedulerDisplay(rungs=tuple(tuple(m) for m in self._milestones))

    def bracket_of(self, trial_id: str) -> int | None:
        """The bracket the trial was assigned to (None: unknown trial)."""
        entry = self._trials.get(trial_id)
        return None if entry is None else entry[0]

    def cutoff(self, bracket: int, rung: int) -> float | None:
        """The rung's current cutoff, in raw metric units (None: no score recorded yet)."""
        ordered = self._ordered[bracket][rung]
        if not ordered:
            return None
        value = _percentile_sorted(ordered, (1 - 1 / self.reduction_factor) * 100)
        return value if self.mode == "max" else -value

    # -- events ---------------------------------------------------------------------

    def on_trial_add(self, trial: TrialInfo) -> None:
        self._check_objective()
        if trial.trial_id in self._trials:
            return
        bracket = 0
        if self.brackets > 1:
            bracket = self._rng.choices(range(self.brackets), weights=self._weights)[0]
        self._trials[trial.trial_id] = [bracket, 0]

    def on_trial_result(
        self, trial: TrialInfo, result: Mapping[str, Any], population: Population
    ) -> list[Decision]:
        time, score = self._time_of(result), self._score_of(result)
        if time is None or score is None:
            return []
        if trial.trial_id in self._stopped:
            return [Stop(trial.trial_id)]  # its earlier decision stands
        if trial.trial_id not in self._trials:
            self.on_trial_add(trial)
        # Recorded first, also at max_t: a result there may pass rungs whose results
        # lacked the metric, and the others' cutoffs must count it (on_trial_complete
        # leaves stopped trials alone).
        below_cutoff = self._advance(trial.trial_id, time, score)
        if below_cutoff or (self.stop_last_trials and time >= self.max_t):
            self._stopped.add(trial.trial_id)
            return [Stop(trial.trial_id)]
        return []

    def on_trial_complete(
        self, trial: TrialInfo, result: Mapping[str, Any] | None, population: Population
    ) -> list[Decision]:
        """Record the final result at a rung it reached (for the others' cutoffs)."""
        time, score = self._time_of(result), self._score_of(result)
        if time is not None and score is not None and trial.trial_id in self._trials:
            if trial.trial_id not in self._stopped:
                self._advance(trial.trial_id, time, score)
        return []

    def _advance(self, trial_id: str, time: float, score: float) -> bool:
        """Record the trial at the highest new rung it reached; True: stop it there."""
        entry = self._trials[trial_id]
        bracket, passed = entry
        milestones = self._milestones[bracket]
        reached = passed
        while reached < len(milestones) and time >= milestones[reached]:
            reached += 1
        if reached == passed:
            return False  # no new rung (or it re-entered below one it passed)
        entry[1] = reached
        rung = reached - 1
        self._records[bracket][rung][trial_id] = score
        ordered = self._ordered[bracket][rung]
        if score != -math.inf:
            bisect.insort(ordered, score)
        if not ordered:
            return False  # only worst scores recorded: nothing to compare with
        if score == -math.inf:
            return True
        return score < _percentile_sorted(ordered, (1 - 1 / self.reduction_factor) * 100)

    def next_decision_at(self, trial: TrialInfo) -> float | None:
        if trial.trial_id in self._stopped:
            return None
        current = self._current_time(trial)
        entry = self._trials.get(trial.trial_id)
        # An unknown trial may land in any bracket: bracket 0 has the earliest rungs.
        bracket, passed = entry if entry is not None else (0, 0)
        points = [m for m in self._milestones[bracket][passed:] if m > current][:1]
        if self.stop_last_trials and self.max_t > current:
            points.append(self.max_t)
        return min(points) if points else None

    # -- state ----------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "mode": self.mode,
            "rng": rng_state(self._rng),
            "trials": {tid: list(entry) for tid, entry in self._trials.items()},
            "stopped": sorted(self._stopped),
            "records": [[dict(rung) for rung in bracket] for bracket in self._records],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.metric, self.mode = state["metric"], state["mode"]
        set_rng_state(self._rng, state["rng"])
        self._trials = {tid: list(entry) for tid, entry in state["trials"].items()}
        self._stopped = set(state["stopped"])
        self._records = [[dict(rung) for rung in bracket] for bracket in state["records"]]
        self._ordered = [
            [sorted(v for v in rung.values() if v != -math.inf) for rung in bracket]
            for bracket in self._records
        ]
