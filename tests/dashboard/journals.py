"""Journals for the dashboard's tests: written by the real journal writer
(:class:`orchestrator.journal.writer.Journal`) from plain trial records, and read
through a storage that remembers what was read."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from orchestrator.core.events import ActorReady, Launch
from orchestrator.core.machine import TrialMachine, TrialState
from orchestrator.journal.writer import Journal
from storage import LocalStorage


class CountingStorage(LocalStorage):
    """A real local storage that records every key read through it."""

    def __init__(self, root: str, **options: Any) -> None:
        super().__init__(root, **options)
        self.reads: list[str] = []

    async def read_bytes(self, key: str) -> bytes:
        self.reads.append(key)
        return await super().read_bytes(key)


@dataclass
class Spec:
    trial_id: str
    config: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "trainable": "tests.support.trainables:Counter",
            "config": self.config,
            "checkpoint_every": 0,
            "resources": {"cpu": 1.0},
            "max_failures": 0,
        }


@dataclass
class Record:
    """What the journal reads of a trial (the engine's ``TrialRuntime``, in plain)."""

    id: str
    spec: Spec
    machine: Any
    results: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    config_pickle: str | None = None
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def last_result(self) -> dict[str, Any] | None:
        return self.results[-1] if self.results else None

    @property
    def state(self) -> Any:
        return self.machine.state

    sealed = False

    def seal(self, sealer: Any) -> bool:
        """Never a tombstone (``engine/tombstone.py``): its parts stay as they are."""
        return False


def record(trial_id: str, **config: Any) -> Record:
    machine = TrialMachine(trial_id)  # the real record the writer reads, as it runs
    machine.handle(Launch())
    machine.handle(ActorReady(machine.generation))
    return Record(trial_id, Spec(trial_id, dict(config)), machine, config=dict(config))


class Run:
    """A journal being written, one trial record per id, the way the engine drives it."""

    def __init__(self, store: LocalStorage, trials: list[str], name: str = "exp") -> None:
        self.journal = Journal(store, name=name, interval=0.05)
        self.trials = {t: record(t, lr=0.1 * (i + 1)) for i, t in enumerate(trials)}
        for trial in self.trials.values():
            self.journal.track(trial)

    def report(self, trial_id: str, **metrics: Any) -> dict[str, Any]:
        trial = self.trials[trial_id]
        result = {"training_iteration": len(trial.results) + 1, **metrics}
        trial.results.append(result)
        trial.machine.iteration = result["training_iteration"]
        self.journal.record_result(trial, result)  # type: ignore[arg-type]
        return result

    def roll_back(self, trial_id: str, length: int) -> None:
        trial = self.trials[trial_id]
        del trial.results[length:]
        trial.machine.iteration = length
        self.journal.truncate(trial, length)  # type: ignore[arg-type]

    def end(self, trial_id: str, state: TrialState, error: str | None = None) -> None:
        trial = self.trials[trial_id]
        running = trial.machine
        trial.machine = TrialMachine.resumed(  # settled as a journal would leave it
            trial_id,
            running.policy,
            state=state,
            checkpoints=list(running.checkpoints),
            num_failures=running.num_failures,
            iteration=running.iteration,
            error=RuntimeError(error) if error else None,
        )
        self.journal.touch()

    async def write(self) -> None:
        await self.journal.flush()
        await asyncio.sleep(0)
