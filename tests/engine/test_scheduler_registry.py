"""A scheduler registered in one place is offered by the command line and named by the
Tune facade, runs a sweep, and what it declares to show (:meth:`Scheduler.display`)
reaches the journal and the dashboard: no front end names it."""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from orchestrator import TrialState, tune
from orchestrator.cli.main import build_parser
from orchestrator.cli.sweep import _scheduler
from orchestrator.schedulers import (
    Decision,
    Population,
    Scheduler,
    SchedulerDisplay,
    SchedulerKind,
    Stop,
    TrialInfo,
    register_scheduler,
)
from orchestrator.schedulers.registry import _KINDS
from orchestrator.search import grid
from orchestrator.tune import TuneUnsupported
from orchestrator.views.dashboard.payloads import experiment
from orchestrator.views.dashboard.tail import JournalTail
from storage import LocalStorage

from ..support.fake_engine import MakeOrchestrator
from .trainables import FakeCurve


class HalfWay(Scheduler):
    """Stops every trial at half its ``max_t``; shows that point as its one rung."""

    def __init__(self, max_t: int = 10, metric: str | None = None, mode: str | None = None):
        super().__init__(metric=metric, mode=mode)
        self.max_t = max_t
        self.stopped: list[str] = []

    def on_trial_result(
        self, trial: TrialInfo, result: Mapping[str, Any], population: Population
    ) -> list[Decision]:
        if (self._time_of(result) or 0) >= self.max_t // 2:
            self.stopped.append(trial.trial_id)
            return [Stop(trial.trial_id)]
        return []

    def next_decision_at(self, trial: TrialInfo) -> float | None:
        return float(self.max_t // 2) if trial.iteration < self.max_t // 2 else None

    def display(self) -> SchedulerDisplay:
        return SchedulerDisplay(rungs=((float(self.max_t // 2),),))

    def state_dict(self) -> dict[str, Any]:
        return {"stopped": list(self.stopped)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stopped = list(state["stopped"])


@pytest.fixture
def halfway() -> Iterator[None]:
    register_scheduler(
        SchedulerKind(
            "halfway",
            HalfWay,
            "stop at max_t / 2",
            takes_max_t=True,
            tune_classes=("HalfWayScheduler",),
        )
    )
    yield
    del _KINDS["halfway"]


@pytest.mark.usefixtures("halfway")
async def test_a_scheduler_registered_once_is_seen_everywhere(
    tmp_path: Path, orchestrator: MakeOrchestrator, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--help"])
    assert "halfway: stop at max_t / 2" in " ".join(capsys.readouterr().out.split())
    args = parser.parse_args(
        ["run", "x:y", "--space", "{}", "--scheduler", "halfway", "--metric", "acc"]
        + ["--max-t", "6"]
    )
    scheduler = _scheduler(args, None)
    assert isinstance(scheduler, HalfWay) and scheduler.max_t == 6
    # The Tune facade names it among the schedulers it takes.
    with pytest.raises(TuneUnsupported, match="MedianStoppingRule, .*HalfWayScheduler"):
        tune.Tuner(lambda config: None, tune_config=tune.TuneConfig(scheduler=object()))

    async with orchestrator(storage=tmp_path, name="toy", progress=False) as orch:
        result = await orch.sweep(
            FakeCurve,
            {"plateau": grid([1.0, 2.0]), "marks": str(tmp_path)},
            metric="acc",
            mode="max",
            scheduler=scheduler,
            stop={"training_iteration": 100},
            resources={"cpu": 0.25},
        )
    assert [len(t.results) for t in result.trials] == [3, 3]
    assert all(t.state is TrialState.TERMINATED for t in result.trials)

    async with LocalStorage(str(tmp_path)) as store:
        tail = JournalTail(store, "toy", str(tmp_path / "toy"))
        await tail.refresh(results=True)
        assert tail.problem is None
        page = experiment("toy", tail, None, None, "training_iteration")
    assert page["rungs"] == [[3.0]]


def test_args_namespace_is_what_the_builder_reads() -> None:
    """The builder reads only ``scheduler``, ``metric`` and ``max_t`` of the args."""
    args = argparse.Namespace(scheduler="median", metric="acc", max_t=None)
    assert type(_scheduler(args, {"training_iteration": 5})).__name__ == "MedianStopping"
    assert _scheduler(argparse.Namespace(scheduler="fifo", metric=None, max_t=None), None) is None
