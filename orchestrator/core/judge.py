"""Judges: what decides, after each result and before the next step, whether a trial
goes on.

The state machine asks its trial's judge about every result before it asks for the
next step, so a decision is never a step late. A judge answers with a
:class:`~orchestrator.core.decisions.Decision` about the trial (``Stop``, ``Pause``,
``Hold``, ``RestoreFrom``) or ``None`` to let it go on, and the machine carries the
decision out exactly as it carries out the same decision sent by anyone else (the user's
``trial.stop()``, a sweep). A judge also says how far the trial may run ahead before it
must decide again (:meth:`Judge.next_decision_at`): buffered steps are capped there the
way checkpoints cap them, so a scheduler's rung or a PBT boundary is decided on exactly
the result that reaches it. The stop criterion is one judge; a sweep's scheduler is
another (:mod:`orchestrator.sweeps.scheduler_judge`); several combine with :class:`Judges`.
Judges are built with the trial's policy and never changed after. Sans-IO, like the
machine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.core.decisions import Continue, Decision, Stop

if TYPE_CHECKING:
    from orchestrator.core.stopping import StopCondition


class Judge(Protocol):
    def judge(self, result: Mapping[str, Any]) -> Decision | None:
        """The decision on ``result`` (numbered: it has ``training_iteration``); None
        (or ``Continue``): it goes on."""
        ...

    def next_decision_at(self, iteration: int) -> int | None:
        """The ``training_iteration`` whose result this judge must see before any later
        step runs (its next decision point after ``iteration``); None: none ahead."""
        ...


def decides(decision: Decision | None) -> bool:
    """``decision`` says something other than "go on"."""
    return decision is not None and not isinstance(decision, Continue)


@dataclass(frozen=True, slots=True)
class StopJudge:
    """The stop criterion as a judge: ``Stop`` once it is met."""

    stop: StopCondition

    def judge(self, result: Mapping[str, Any]) -> Decision | None:
        return Stop(self.stop.trial_id) if self.stop(result) else None

    def next_decision_at(self, iteration: int) -> int | None:
        limit = self.stop.iteration_limit
        return limit if limit is not None and limit > iteration else None


@dataclass(frozen=True, slots=True, init=False)
class Judges:
    """Several judges as one: the first that decides something decides; the earliest
    decision point of any caps the run-ahead."""

    judges: tuple[Judge, ...]

    def __init__(self, judges: Sequence[Judge]) -> None:
        object.__setattr__(self, "judges", tuple(judges))

    def judge(self, result: Mapping[str, Any]) -> Decision | None:
        for judge in self.judges:
            decision = judge.judge(result)
            if decides(decision):
                return decision
        return None

    def next_decision_at(self, iteration: int) -> int | None:
        points = [p for j in self.judges if (p := j.next_decision_at(iteration)) is not None]
        return min(points) if points else None


class NoJudge:
    """Never decides anything (a machine driven by hand, in tests)."""

    __slots__ = ()

    def judge(self, result: Mapping[str, Any]) -> Decision | None:
        return None

    def next_decision_at(self, iteration: int) -> int | None:
        return None


def stop_already_met(judge: Judge, result: Mapping[str, Any]) -> bool:
    """Whether the trial's stop criterion's thresholds hold on ``result``, a checkpoint's
    metrics: a run restarted there has nothing left to do. Only thresholds are asked: a
    stop function or a scheduler may keep state that a result seen twice would corrupt."""
    if isinstance(judge, Judges):
        return any(stop_already_met(j, result) for j in judge.judges)
    return isinstance(judge, StopJudge) and judge.stop.thresholds_met(result)
