"""A trial's machine driven by hand: checkpoints, a machine (running or not), its
actions' kinds, a result fed in (the core tests of the lifecycle, decisions, table)."""

from __future__ import annotations

from typing import Any

from orchestrator.core.checkpoints import Checkpoint
from orchestrator.core.events import (
    ActorReady,
    Launch,
    TrainResult,
)
from orchestrator.core.judge import StopJudge
from orchestrator.core.machine import (
    TrialMachine,
    TrialPolicy,
    TrialState,
)
from orchestrator.core.stopping import StopCondition


def ckpt(iteration: int, trial: str = "t", **metrics: Any) -> Checkpoint:
    key = f"{trial}/checkpoint_{iteration:06d}"
    return Checkpoint(trial, iteration, key, "file:///x/" + key, metrics=metrics)


def machine(**policy: Any) -> TrialMachine:
    stop = policy.pop("stop", None)
    if stop is not None:
        policy["judge"] = StopJudge(StopCondition("t", stop))
    return TrialMachine("t", TrialPolicy(**policy))


def running(**policy: Any) -> TrialMachine:
    m = machine(**policy)
    m.handle(Launch())
    m.handle(ActorReady(m.generation))
    assert m.state is TrialState.RUNNING
    return m


def kinds(actions: list[Any]) -> list[str]:
    return [type(a).__name__ for a in actions]


def result(m: TrialMachine, **metrics: Any) -> list[Any]:
    return m.handle(TrainResult(m.generation, (metrics,)))
