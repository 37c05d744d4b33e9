"""A sweep's admission costs what is live, not every trial it ever created (issue 36).

At each admission the sweep asks how many slots are free, whether all its trials are
placed and whether all are settled. It used to ask every trial it had created, so a
sweep of N trials cost O(N) per admission and O(N^2) in all (at ten thousand trivial
trials, most of the driver's time). It now asks only the trials that have not ended; a
trial that ended and is brought back (a restore) is one of those again, told by the loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Trainable
from orchestrator.api.sweep_port import ExperimentPort
from orchestrator.core.decisions import Decision, RestoreFrom
from orchestrator.schedulers import FIFO
from orchestrator.search import uniform

from ..support.fake_engine import MakeOrchestrator
from ..support.trainables import Counter


async def test_admission_asks_only_the_trials_that_have_not_ended(
    tmp_path: Path, orchestrator: MakeOrchestrator, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = 0
    is_settled = ExperimentPort.is_settled

    def counting(self: ExperimentPort, rt: Any) -> bool:
        nonlocal asked
        asked += 1
        return is_settled(self, rt)

    monkeypatch.setattr(ExperimentPort, "is_settled", counting)
    trials = 80
    async with orchestrator(storage=tmp_path, name="admit", progress=False, loggers=[]) as orch:
        result = await orch.sweep(
            Counter,
            {"x": uniform(0, 1)},
            num_samples=trials,
            max_concurrent_trials=2,
            stop={"training_iteration": 1},
            resources={"cpu": 0.25},
            seed=0,
        )
    assert len(result.trials) == trials and not result.errors
    # Each admission looks at the few live trials: some tens of looks per trial. Asking
    # every trial created so far at each admission was N^2/2 looks or more (> 3,200).
    assert asked < 25 * trials, f"{asked} looks at trials for {trials} trials"


class _Saving(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.count = 0

    def step(self) -> dict[str, Any]:
        self.count += 1
        return {"score": float(self.count)}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        Path(checkpoint_dir, "count").write_text(str(self.count))

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        self.count = int(Path(checkpoint_dir, "count").read_text())


class _ReviveFirst(FIFO):
    """Brings the sweep's first trial back, when it ends, from its first checkpoint."""

    def __init__(self) -> None:
        super().__init__()
        self.first: Any = None
        self.revived = False

    def on_trial_result(
        self, trial: Any, result: Mapping[str, Any], population: Any
    ) -> list[Decision]:
        if self.first is None and trial.checkpoint is not None:
            self.first = trial.checkpoint
        return []

    def on_trial_complete(
        self, trial: Any, result: Mapping[str, Any] | None, population: Any
    ) -> list[Decision]:
        if self.revived or self.first is None or self.first.trial_id != trial.trial_id:
            return []
        self.revived = True
        return [RestoreFrom(trial.trial_id, self.first)]


async def test_a_trial_brought_back_after_it_ended_holds_a_slot_again(
    tmp_path: Path, orchestrator: MakeOrchestrator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One trial at a time: when the sweep launches a trial, no other holds an actor or
    waits for the loop to move it (a restore just sent). It used to start a new trial in
    the slot of the trial it had just sent back to run."""
    busy_at_launch: list[list[str]] = []
    launch = ExperimentPort.launch

    def watched(self: ExperimentPort, rt: Any) -> None:
        busy_at_launch.append(
            [
                t.id
                for t in self._exp.trials.values()
                if t is not rt and (t.machine.state.has_actor or not self.is_settled(t))
            ]
        )
        launch(self, rt)

    monkeypatch.setattr(ExperimentPort, "launch", watched)
    scheduler = _ReviveFirst()
    async with orchestrator(storage=tmp_path, name="revive", progress=False, loggers=[]) as orch:
        result = await orch.sweep(
            _Saving,
            {"x": uniform(0, 1)},
            num_samples=6,
            max_concurrent_trials=1,
            stop={"training_iteration": 3},
            checkpoint_every=1,
            resources={"cpu": 0.25},
            scheduler=scheduler,
            seed=0,
        )
        orch_trials = list(orch._exp.trials.values())
    assert scheduler.revived
    assert not result.errors and len(result.trials) == 6
    trial = orch_trials[0]
    assert [e["kind"] for e in trial.events] == ["restore"]
    assert trial.machine.iteration == 3  # rolled back to 1, ran to 3 again
    assert len(busy_at_launch) == 6 and not any(busy_at_launch), busy_at_launch
