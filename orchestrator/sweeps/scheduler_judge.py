"""A sweep's scheduler as each of its trials' judge.

The scheduler (:mod:`orchestrator.schedulers`) is sans-IO and speaks of plain
:class:`~orchestrator.schedulers.TrialInfo` snapshots and decisions. This adapter sits
between it and the state machine: :class:`SchedulerJudge` is a trial's judge (see
:mod:`orchestrator.core.judge`): it shows the scheduler each result, with a live view of the
whole population, before the machine asks for the next step, and hands the decision
about that trial to the machine as it is (the decisions are the machine's own, see
:mod:`orchestrator.core.decisions`). Decisions about *other* trials (HyperBand promoting
its paused trials, synchronous PBT releasing its barrier) go to the sweep, which sends
them to those trials as the same ``Decided`` events a user's ``trial.stop()``,
``resume()`` or ``restore()`` sends.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.schedulers import Continue, Decision, Resume, Scheduler, Stop, TrialInfo

if TYPE_CHECKING:
    from orchestrator.engine.trial_runtime import TrialRuntime


def info_of(rt: TrialRuntime) -> TrialInfo:
    if rt.sealed:
        return _EndedInfo(rt)
    machine = rt.machine
    return TrialInfo(
        trial_id=rt.id,
        config=rt.config,
        state=machine.state.value,
        iteration=machine.iteration,
        last_result=rt.last_result,
        checkpoint=machine.latest_checkpoint,
    )


class _EndedInfo(TrialInfo):
    """A sealed trial's snapshot (``engine/tombstone.py``): its config and checkpoint are
    read from its tombstone only when a scheduler asks for them (rarely, for a trial
    that ended), so a scheduler reading the whole population opens no tombstone."""

    def __init__(self, rt: TrialRuntime) -> None:  # not the dataclass's: lazy fields
        for name, value in (
            ("trial_id", rt.id),
            ("state", rt.state.value),
            ("iteration", rt.iteration),
            ("last_result", rt.last_result),
            ("_rt", rt),
        ):
            object.__setattr__(self, name, value)

    @property  # type: ignore[override]
    def config(self) -> Mapping[str, Any]:
        return self._rt.peek().config  # type: ignore[attr-defined, no-any-return]

    @property  # type: ignore[override]
    def checkpoint(self) -> Any:
        return self._rt.peek().machine.latest_checkpoint  # type: ignore[attr-defined]


class PopulationView(Mapping[str, TrialInfo]):
    """Every trial of the sweep, as snapshots made when asked for (a scheduler that
    reads two trials pays for two)."""

    def __init__(self, trials: Mapping[str, TrialRuntime]) -> None:
        self._trials = trials

    def __getitem__(self, trial_id: str) -> TrialInfo:
        return info_of(self._trials[trial_id])

    def __iter__(self) -> Iterator[str]:
        return iter(self._trials)

    def __len__(self) -> int:
        return len(self._trials)

    def runtime(self, trial_id: str) -> TrialRuntime:
        """The trial itself, for what a snapshot does not carry (its journal notes)."""
        return self._trials[trial_id]


class SchedulerJudge:
    """One trial's judge, asking the sweep's scheduler (see the module docstring). It
    knows its trial by id, and sees it as the scheduler does: through the population."""

    __slots__ = ("_trial_id", "_scheduler", "_population", "_others", "_touched", "_by_iteration")

    def __init__(
        self,
        trial_id: str,
        scheduler: Scheduler,
        population: PopulationView,
        others: Callable[[list[Decision]], None],
        touched: Callable[[], None],
    ) -> None:
        self._trial_id = trial_id
        self._touched = touched  # told of every call (the scheduler's state may change)
        self._scheduler = scheduler
        self._population = population
        self._others = others
        # Its decision points are iterations: the run-ahead can be capped exactly. With
        # another time attribute (seconds...), every result must be seen.
        self._by_iteration = scheduler.time_attr == "training_iteration"

    def judge(self, result: Mapping[str, Any]) -> Decision | None:
        info = self._population[self._trial_id]
        mine = self.split(self._scheduler.on_trial_result(info, result, self._population))
        self._touched()
        if isinstance(mine, Stop):
            note_stop(self._population.runtime(self._trial_id), self._scheduler, result)
        return mine

    def split(self, decisions: list[Decision]) -> Decision | None:
        """The decision about this trial (None: it goes on); the rest go to the sweep."""
        mine: Decision | None = None
        others = []
        for decision in decisions:
            if decision.trial_id == self._trial_id:
                mine = decision
            else:
                others.append(decision)
        if others:
            self._others(others)
        if isinstance(mine, Continue | Resume):
            return None  # it is running: it goes on
        return mine

    def next_decision_at(self, iteration: int) -> int | None:
        if not self._by_iteration:
            return iteration + 1
        point = self._scheduler.next_decision_at(self._population[self._trial_id])
        self._touched()
        if point is None:
            return None
        return max(iteration + 1, math.ceil(point))


def note_stop(rt: TrialRuntime, scheduler: Scheduler, result: Mapping[str, Any] | None) -> None:
    """Journal the scheduler's stop among the trial's events (``show`` and the dashboard
    list them): when, by which scheduler, and the metric it judged."""
    metric = getattr(scheduler, "metric", None)
    value = (result or rt.last_result or {}).get(metric) if isinstance(metric, str) else None
    iteration = (result or {}).get("training_iteration", rt.machine.iteration)
    rt.note("stop", iteration, by=type(scheduler).__name__, metric=metric, value=value)
