"""Synchronous HyperBand (Li et al., https://arxiv.org/abs/1603.06560).

Trials fill brackets in the order they are added: bracket ``s = s_max`` first (the most
aggressive: many trials, short first milestone), then ``s_max - 1`` ... ``0``, then again
from ``s_max``. Inside a bracket, successive halving is *synchronous*: a trial that reaches
the bracket's milestone is Paused (its resources go to others) until every trial of the
bracket still alive has reached it; then the best ``n_{i+1}`` are Resumed to the next
milestone and the rest Stopped.

Numbers (``eta = reduction_factor``, exact integer arithmetic when the inputs are ints):

* ``s_max = round(log(max_t) / log(eta))``, as Ray Tune's HyperBandScheduler;
* bracket size ``n_0(s) = ceil((s_max + 1) * eta**s / (s + 1))``, the paper's and Ray's;
* milestones ``r_i(s) = floor(max_t / eta**(s - i))`` for i < s, and ``r_s = max_t``
  (the paper's ``R * eta**(i - s)`` rounded down; the last one is always ``max_t``);
  a bracket ``s > 0`` whose first milestone rounds to 0 is skipped, as Ray Tune does;
* survivors ``n_{i+1} = ceil(n_i / eta)``, Ray Tune's rounding (the paper's
  ``floor(n_0 * eta**-i)`` would keep 34, 11, 3, 1 where this keeps 34, 12, 4, 2).

For max_t=81, eta=3: (s, n_0, milestones) = (4, 81, 1-3-9-27-81), (3, 34, 3-9-27-81),
(2, 15, 9-27-81), (1, 8, 27-81), (0, 5, 81).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.schedulers.base import (
    Decision,
    Pause,
    Population,
    Resume,
    ResumeQueue,
    Scheduler,
    Stop,
    TrialInfo,
    check_number,
    is_live,
)


def _ceil_div(a: float, b: float) -> int:
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return math.ceil(a / b - 1e-9)


def _floor_div(a: float, b: float) -> int:
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return math.floor(a / b + 1e-9)


@dataclass
class _Bracket:
    s: int
    size: int  # n_0: trials it takes (fewer when on_idle closed it early)
    members: list[str] = field(default_factory=list)
    closed: bool = False  # takes no more trials: full, or closed by on_idle
    stage: int = 0  # halvings done; the current milestone is milestones[stage]
    removed: set[str] = field(default_factory=set)  # ended, errored or stopped
    reached: dict[str, float] = field(default_factory=dict)  # at the current milestone

    def to_dict(self) -> dict[str, Any]:
        return {
            "s": self.s,
            "size": self.size,
            "members": list(self.members),
            "closed": self.closed,
            "stage": self.stage,
            "removed": sorted(self.removed),
            "reached": dict(self.reached),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> _Bracket:
        return cls(
            s=data["s"],
            size=data["size"],
            members=list(data["members"]),
            closed=data["closed"],
            stage=data["stage"],
            removed=set(data["removed"]),
            reached=dict(data["reached"]),
        )


class HyperBand(Scheduler):
    """Synchronous HyperBand, with Ray Tune's HyperBandScheduler's arguments.

    Decisions: Pause a trial at its bracket's milestone; when the bracket is complete,
    Resume (or, for the reporting trial, Continue) its best ``n_{i+1}`` and Stop the rest;
    Stop at ``max_t`` when ``stop_last_trials`` (else trials train on past it, undecided).
    Ranking is by score (NaN worst); ties go to the trial added first. A trial kept
    whose pause has not landed yet (not PAUSED in the population) is Resumed by the first
    later call that sees it PAUSED. Trials that end or error leave their bracket.
    """

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        max_t: float = 81,
        reduction_factor: float = 3,
        stop_last_trials: bool = True,
    ) -> None:
        super().__init__(time_attr, metric, mode)
        check_number("max_t", max_t)
        check_number(
            "reduction_factor",
            reduction_factor,
            lambda v: 1 < v < math.inf,
            "a number greater than 1",
        )
        self.max_t = max_t
        self.reduction_factor = reduction_factor
        self.stop_last_trials = stop_last_trials
        self.s_max = max(0, round(math.log(max_t) / math.log(reduction_factor)))
        self._milestones = {s: self._bracket_milestones(s) for s in range(self.s_max + 1)}
        self._cycle = [
            s for s in range(self.s_max, -1, -1) if s == 0 or self._milestones[s][0] >= 1
        ]
        self._brackets: list[_Bracket] = []
        self._where: dict[str, int] = {}  # trial id -> index into _brackets
        self._last: dict[str, tuple[float, float]] = {}  # trial id -> newest (time, score)
        self._stopped: set[str] = set()
        self._pending = ResumeQueue()

    def _bracket_milestones(self, s: int) -> list[float]:
        eta = self.reduction_factor
        return [_floor_div(self.max_t, eta ** (s - i)) for i in range(s)] + [self.max_t]

    def _survivors(self, size: int, stage: int) -> int:
        n = size
        for _ in range(stage):
            n = _ceil_div(n, self.reduction_factor)
        return n

    def bracket_plan(self) -> list[tuple[int, list[int], list[float]]]:
        """One band in fill order: (s, [n_0, n_1, ...], [r_0, r_1, ...]) per bracket."""
        plan = []
        for s in self._cycle:
            n_0 = _ceil_div((self.s_max + 1) * self.reduction_factor**s, s + 1)
            plan.append((s, [self._survivors(n_0, i) for i in range(s + 1)], self._milestones[s]))
        return plan

    def bracket_of(self, trial_id: str) -> int | None:
        """The index (in creation order) of the trial's bracket; None: unknown trial."""
        return self._where.get(trial_id)

    # -- events ---------------------------------------------------------------------

    def on_trial_add(self, trial: TrialInfo) -> None:
        self._check_objective()
        if trial.trial_id in self._where:
            return
        if not self._brackets or self._brackets[-1].closed:
            s = self._cycle[len(self._brackets) % len(self._cycle)]
            n_0 = _ceil_div((self.s_max + 1) * self.reduction_factor**s, s + 1)
            self._brackets.append(_Bracket(s=s, size=n_0))
        bracket = self._brackets[-1]
        bracket.members.append(trial.trial_id)
        bracket.closed = len(bracket.members) >= bracket.size
        self._where[trial.trial_id] = len(self._brackets) - 1

    def on_trial_result(
        self, trial: TrialInfo, result: Mapping[str, Any], population: Population
    ) -> list[Decision]:
        time, score = self._time_of(result), self._score_of(result)
        if time is None or score is None:
            return []
        tid = trial.trial_id
        self._pending.discard(tid)
        if tid not in self._where:
            self.on_trial_add(trial)
        bracket = self._brackets[self._where[tid]]
        self._last[tid] = (time, score)
        decisions: dict[str, Decision] = {}
        milestones = self._milestones[bracket.s]
        if tid in bracket.removed:
            if tid in self._stopped:
                decisions[tid] = Stop(tid)  # its earlier decision stands
        elif bracket.stage == bracket.s:  # the last milestone: max_t, nobody waits
            if self.stop_last_trials and time >= milestones[-1]:
                self._stop(bracket, tid, decisions)
        elif time >= milestones[bracket.stage]:
            bracket.reached.setdefault(tid, score)  # a re-report keeps the first record
            decisions[tid] = Pause(tid)
            self._settle(bracket, population, tid, decisions)
        return self._finish(decisions, population)

    def on_trial_complete(
        self, trial: TrialInfo, result: Mapping[str, Any] | None, population: Population
    ) -> list[Decision]:
        return self._leave(trial.trial_id, population)

    def on_trial_error(self, trial: TrialInfo, population: Population) -> list[Decision]:
        return self._leave(trial.trial_id, population)

    def on_idle(self, population: Population) -> list[Decision]:
        """Close a bracket the sweep did not fill, and settle it with the trials it has."""
        decisions: dict[str, Decision] = {}
        if self._brackets and not self._brackets[-1].closed:
            bracket = self._brackets[-1]
            live = self._live(bracket, population, None)
            if live and all(m in bracket.reached for m in live):
                bracket.closed = True
                bracket.size = len(bracket.members)
                self._settle(bracket, population, None, decisions)
        return self._finish(decisions, population)

    def next_decision_at(self, trial: TrialInfo) -> float | None:
        index = self._where.get(trial.trial_id)
        if index is None:  # it will join the current bracket or the next one
            return min(self._milestones[s][0] for s in self._cycle)
        bracket = self._brackets[index]
        if trial.trial_id in bracket.removed:
            return None
        current = self._current_time(trial)
        milestones = self._milestones[bracket.s]
        for i in range(bracket.stage, len(milestones)):
            if milestones[i] > current:
                return None if i == bracket.s and not self.stop_last_trials else milestones[i]
        return None

    # -- the halving ----------------------------------------------------------------

    def _live(self, bracket: _Bracket, population: Population, reporter: str | None) -> list[str]:
        live = []
        for m in bracket.members:
            if m in bracket.removed:
                continue
            if m != reporter and not is_live(population.get(m)):
                bracket.removed.add(m)  # it ended without our hearing of it
                bracket.reached.pop(m, None)
                continue
            live.append(m)
        return live

    def _settle(
        self,
        bracket: _Bracket,
        population: Population,
        reporter: str | None,
        decisions: dict[str, Decision],
    ) -> None:
        """Halve the bracket as long as every live trial has reached its milestone."""
        milestones = self._milestones[bracket.s]
        while bracket.closed and bracket.stage < bracket.s:
            live = self._live(bracket, population, reporter)
            if not live or any(m not in bracket.reached for m in live):
                return
            order = {m: i for i, m in enumerate(bracket.members)}
            ranked = sorted(live, key=lambda m: (-bracket.reached[m], order[m]))
            keep = self._survivors(bracket.size, bracket.stage + 1)
            bracket.stage += 1
            bracket.reached = {}
            target, last = milestones[bracket.stage], bracket.stage == bracket.s
            for m in ranked[keep:]:
                self._stop(bracket, m, decisions)
            for m in ranked[:keep]:
                time, score = self._last[m]
                if time < target or (last and not self.stop_last_trials):
                    self._resume(m, population, reporter, decisions)
                elif last:
                    self._stop(bracket, m, decisions)
                else:  # already past the next milestone too: it stays where it is
                    bracket.reached[m] = score
                    if m != reporter:
                        decisions.pop(m, None)

    def _stop(self, bracket: _Bracket, trial_id: str, decisions: dict[str, Decision]) -> None:
        bracket.removed.add(trial_id)
        bracket.reached.pop(trial_id, None)
        self._stopped.add(trial_id)
        self._pending.discard(trial_id)
        decisions[trial_id] = Stop(trial_id)

    def _resume(
        self,
        trial_id: str,
        population: Population,
        reporter: str | None,
        decisions: dict[str, Decision],
    ) -> None:
        decisions.pop(trial_id, None)
        info = population.get(trial_id)
        if trial_id == reporter:
            return  # it is running: no decision means Continue
        if info is not None and info.state == "PAUSED":
            decisions[trial_id] = Resume(trial_id)
        else:
            self._pending.add(trial_id)  # its pause has not landed yet

    def _leave(self, trial_id: str, population: Population) -> list[Decision]:
        self._pending.discard(trial_id)
        index = self._where.get(trial_id)
        decisions: dict[str, Decision] = {}
        if index is not None:
            bracket = self._brackets[index]
            bracket.removed.add(trial_id)
            bracket.reached.pop(trial_id, None)
            self._settle(bracket, population, None, decisions)
        return self._finish(decisions, population)

    def _finish(self, decisions: dict[str, Decision], population: Population) -> list[Decision]:
        return list(decisions.values()) + self._pending.flush(population, skip=decisions)

    # -- state ----------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "mode": self.mode,
            "brackets": [b.to_dict() for b in self._brackets],
            "last": {tid: list(v) for tid, v in self._last.items()},
            "stopped": sorted(self._stopped),
            "pending": self._pending.to_list(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.metric, self.mode = state["metric"], state["mode"]
        self._brackets = [_Bracket.from_dict(b) for b in state["brackets"]]
        self._where = {m: i for i, b in enumerate(self._brackets) for m in b.members}
        self._last = {tid: (v[0], v[1]) for tid, v in state["last"].items()}
        self._stopped = set(state["stopped"])
        self._pending.load(state["pending"])
