"""A sweep's scheduler as each of its trials' judge.

The scheduler (:mod:`orchestrator.schedulers`) is sans-IO and speaks of plain
:class:`~orchestrator.schedulers.TrialInfo` snapshots and decisions. This adapter sits
between it and the state machine: :class:`SchedulerJudge` is a trial's judge (see
:mod:`orchestrator.core.judge`): it shows the scheduler each result, with a live view of the
whole population, before the machine asks for the next step, and turns the decision
about that trial into a :class:`~orchestrator.core.judge.Judgement`. Decisions about *other*
trials (HyperBand promoting its paused trials, synchronous PBT releasing its barrier)
go to the sweep, which carries them out through the same requests a user's
``trial.stop()``, ``resume()`` or ``restore()`` makes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.core.judge import CONTINUE, Judgement, Verdict
from orchestrator.schedulers import Decision, Exploit, Hold, Pause, Scheduler, Stop, TrialInfo

if TYPE_CHECKING:
    from orchestrator.engine.record import TrialRuntime


def info_of(rt: TrialRuntime) -> TrialInfo:
    machine = rt.machine
    return TrialInfo(
        trial_id=rt.id,
        config=rt.config,
        state=machine.state.value,
        iteration=machine.iteration,
        last_result=rt.last_result,
        checkpoint=machine.latest_checkpoint,
    )


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


class SchedulerJudge:
    """One trial's judge, asking the sweep's scheduler (see the module docstring)."""

    __slots__ = ("_rt", "_scheduler", "_population", "_others", "_by_iteration")

    def __init__(
        self,
        rt: TrialRuntime,
        scheduler: Scheduler,
        population: PopulationView,
        others: Callable[[list[Decision]], None],
    ) -> None:
        self._rt = rt
        self._scheduler = scheduler
        self._population = population
        self._others = others
        # Its decision points are iterations: the run-ahead can be capped exactly. With
        # another time attribute (seconds...), every result must be seen.
        self._by_iteration = scheduler.time_attr == "training_iteration"

    def judge(self, result: Mapping[str, Any]) -> Judgement:
        decisions = self._scheduler.on_trial_result(info_of(self._rt), result, self._population)
        judgement = self.split(decisions)
        if judgement.verdict is Verdict.FINISH:
            note_stop(self._rt, self._scheduler, result)
        return judgement

    def split(self, decisions: list[Decision]) -> Judgement:
        """The judgement about this trial; the rest go to the sweep."""
        mine: Decision | None = None
        others = []
        for decision in decisions:
            if decision.trial_id == self._rt.id:
                mine = decision
            else:
                others.append(decision)
        if others:
            self._others(others)
        return judgement_of(mine)

    def next_decision_at(self, iteration: int) -> int | None:
        if not self._by_iteration:
            return iteration + 1
        point = self._scheduler.next_decision_at(info_of(self._rt))
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


def judgement_of(decision: Decision | None) -> Judgement:
    if isinstance(decision, Stop):
        return Judgement(Verdict.FINISH)
    if isinstance(decision, Pause):
        return Judgement(Verdict.PAUSE)
    if isinstance(decision, Hold):
        return Judgement(Verdict.HOLD)
    if isinstance(decision, Exploit):
        return Judgement(Verdict.EXPLOIT, decision.checkpoint, dict(decision.config))
    return CONTINUE  # Continue, Resume (it is running), or nothing said
