"""Judges: what decides, after each result and before the next step, whether a trial
goes on.

The state machine asks its trial's judge about every result before it asks for the
next step, so a decision is never a step late. A judge also says how far the trial may
run ahead before it must decide again (:meth:`Judge.next_decision_at`): buffered steps
are capped there the way checkpoints cap them, so a scheduler's rung or a PBT boundary
is decided on exactly the result that reaches it. The stop criterion is one judge; a
sweep's scheduler is another (:mod:`orchestrator.sweeps.driver`); several combine with
:class:`Judges`. Sans-IO, like the machine.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from orchestrator.core.checkpoints import Checkpoint
    from orchestrator.core.stopping import StopCondition


class Verdict(enum.Enum):
    CONTINUE = "continue"
    FINISH = "finish"  # end it: TERMINATED
    PAUSE = "pause"  # save, free its resources; a later request resumes it
    HOLD = "hold"  # keep its actor, train no further until a ``Decided`` event
    EXPLOIT = "exploit"  # restore ``checkpoint`` (another trial's) with ``config``


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    checkpoint: Checkpoint | None = None
    config: Mapping[str, Any] | None = None


CONTINUE = Judgement(Verdict.CONTINUE)


class Judge(Protocol):
    def judge(self, result: Mapping[str, Any]) -> Judgement:
        """The decision on ``result`` (numbered: it has ``training_iteration``)."""
        ...

    def next_decision_at(self, iteration: int) -> int | None:
        """The ``training_iteration`` whose result this judge must see before any later
        step runs (its next decision point after ``iteration``); None: none ahead."""
        ...


class StopJudge:
    """The stop criterion as a judge: FINISH once it is met."""

    __slots__ = ("stop",)

    def __init__(self, stop: StopCondition) -> None:
        self.stop = stop

    def judge(self, result: Mapping[str, Any]) -> Judgement:
        return Judgement(Verdict.FINISH) if self.stop(result) else CONTINUE

    def next_decision_at(self, iteration: int) -> int | None:
        limit = self.stop.iteration_limit
        return limit if limit is not None and limit > iteration else None


class Judges:
    """Several judges as one: the first that does not say CONTINUE decides; the
    earliest decision point of any caps the run-ahead."""

    __slots__ = ("judges",)

    def __init__(self, judges: Sequence[Judge]) -> None:
        self.judges = tuple(judges)

    def judge(self, result: Mapping[str, Any]) -> Judgement:
        for judge in self.judges:
            judgement = judge.judge(result)
            if judgement.verdict is not Verdict.CONTINUE:
                return judgement
        return CONTINUE

    def next_decision_at(self, iteration: int) -> int | None:
        points = [p for j in self.judges if (p := j.next_decision_at(iteration)) is not None]
        return min(points) if points else None


class NoJudge:
    """Never decides anything (a machine driven by hand, in tests)."""

    def judge(self, result: Mapping[str, Any]) -> Judgement:
        return CONTINUE

    def next_decision_at(self, iteration: int) -> int | None:
        return None
