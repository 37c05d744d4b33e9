"""FIFO, and the contract every scheduler shares (checked on random result streams)."""

from __future__ import annotations

import dataclasses
import json
import math
import pickle
import random
import sys
from typing import Any

import pytest

import orchestrator.schedulers as schedulers
from orchestrator.errors import ConfigError
from orchestrator.schedulers import (
    ASHA,
    FIFO,
    PBT,
    Continue,
    Decision,
    Exploit,
    Hold,
    HyperBand,
    MedianStopping,
    Pause,
    Resume,
    Scheduler,
    SchedulerDisplay,
    Stop,
    TrialInfo,
    scheduler_kinds,
)


def info(tid: str = "a", it: int = 0, **kwargs: Any) -> TrialInfo:
    return TrialInfo(tid, kwargs.pop("config", {}), kwargs.pop("state", "RUNNING"), it, None)


PBT_ARGS: dict[str, Any] = {"hyperparam_mutations": {"lr": [0.1, 0.01, 0.001]}, "seed": 3}


def test_fifo_never_decides() -> None:
    fifo = FIFO()
    trial = info("a", 5)
    fifo.set_search_properties(None, None)  # needs no objective
    fifo.on_trial_add(trial)
    result = {"training_iteration": 5, "score": math.nan}
    assert fifo.on_trial_result(trial, result, {"a": trial}) == []
    assert fifo.on_trial_complete(trial, result, {"a": trial}) == []
    assert fifo.on_trial_error(trial, {"a": trial}) == []
    assert fifo.on_idle({"a": trial}) == []
    assert fifo.next_decision_at(trial) is None
    assert fifo.state_dict() == {}
    fifo.load_state_dict({})


def test_fifo_still_checks_the_mode() -> None:
    with pytest.raises(ConfigError, match="mode"):
        FIFO().set_search_properties("score", "average")


def test_snapshots_and_decisions_are_frozen_values() -> None:
    trial = info()
    with pytest.raises(dataclasses.FrozenInstanceError):
        trial.state = "PAUSED"  # type: ignore[misc]
    decisions: list[Decision] = [Stop("a"), Stop("a"), Continue("a")]
    assert decisions[0] == decisions[1] and decisions[0] != decisions[2]
    assert Exploit("a", "b", None, {"x": 1}).donor_id == "b"


def test_exports() -> None:
    assert set(schedulers.__all__) == {
        "Scheduler",
        "FIFO",
        "ASHA",
        "HyperBand",
        "MedianStopping",
        "PBT",
        "TrialInfo",
        "Population",
        "Decision",
        "Continue",
        "Stop",
        "Pause",
        "Hold",
        "Resume",
        "Exploit",
        "SchedulerDisplay",
        "SchedulerKind",
        "register_scheduler",
        "scheduler_kind",
        "scheduler_kinds",
    }
    for name in schedulers.__all__:
        assert hasattr(schedulers, name)
    for kind in schedulers.scheduler_kinds():  # a registered scheduler is exported
        assert getattr(schedulers, kind.cls.__name__) is kind.cls, kind.name


def test_no_ray_and_no_asyncio() -> None:
    for module in ("base", "asha", "hyperband", "median", "pbt"):
        source = sys.modules[f"orchestrator.schedulers.{module}"].__file__
        assert source is not None
        text = open(source, encoding="utf-8").read()
        assert "import ray" not in text and "asyncio" not in text


@pytest.mark.parametrize(
    "make",
    [
        lambda: ASHA(),
        lambda: HyperBand(),
        lambda: MedianStopping(),
        lambda: PBT(hyperparam_mutations={"lr": [0.1, 0.01]}),
    ],
)
def test_set_search_properties_fills_in_and_validates(make: Any) -> None:
    scheduler: Scheduler = make()
    with pytest.raises(ConfigError, match="needs a metric and a mode"):
        scheduler.set_search_properties(None, None)
    with pytest.raises(ConfigError, match="mode"):
        scheduler.set_search_properties("score", "avg")
    scheduler = make()
    scheduler.set_search_properties("score", "max")
    assert (scheduler.metric, scheduler.mode, scheduler.time_attr) == (
        "score",
        "max",
        "training_iteration",
    )
    scheduler.on_trial_add(info())  # now it can take trials


def test_time_attr_other_than_training_iteration() -> None:
    asha = ASHA(time_attr="time_total_s", metric="score", mode="max", max_t=60, grace_period=10)
    trial = TrialInfo("a", {}, "RUNNING", 3, {"time_total_s": 12.5, "score": 1.0})
    asha.on_trial_add(trial)
    assert asha.next_decision_at(trial) == 40  # rungs 10, 40 (< 60): 10 is behind it
    assert asha.on_trial_result(trial, {"training_iteration": 3, "score": 1.0}, {}) == []


# -- the shared contract, on random streams ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class Ckpt:
    trial_id: str
    iteration: int


class Twin:
    """Two schedulers fed the same calls; the second one is rebuilt from state_dict()
    every few calls. Their answers must agree."""

    def __init__(self, make: Any) -> None:
        self.make, self.a, self.b, self.calls = make, make(), make(), 0

    def __call__(self, method: str, *args: Any) -> Any:
        got = getattr(self.a, method)(*args)
        assert getattr(self.b, method)(*args) == got, method
        # What people are shown is declared, JSON, and follows the journal's state.
        shown = self.a.display()
        assert isinstance(shown, SchedulerDisplay) and self.b.display() == shown
        json.dumps(shown.journal_fields())
        self.calls += 1
        if self.calls % 7 == 0:
            state = pickle.loads(pickle.dumps(self.b.state_dict()))
            self.b = self.make()
            self.b.load_state_dict(state)
        return got


MAKERS = {
    "fifo": lambda: FIFO(),
    "asha": lambda: ASHA(metric="s", mode="max", max_t=27, reduction_factor=3, brackets=3, seed=1),
    "hyperband": lambda: HyperBand(metric="s", mode="max", max_t=27),
    "median": lambda: MedianStopping(metric="s", mode="min", grace_period=2, hard_stop=False),
    "pbt": lambda: PBT(metric="s", mode="max", perturbation_interval=3, **PBT_ARGS),
    "pbt-synch": lambda: PBT(
        metric="s", mode="max", perturbation_interval=3, synch=True, **PBT_ARGS
    ),
}


def test_every_registered_scheduler_runs_the_contract() -> None:
    """A scheduler added to the registry is held to what the others do: it needs a
    maker here, and then runs the random streams below (its journal state reloaded
    every few calls, its display declared and reloaded with it)."""
    for kind in scheduler_kinds():
        assert kind.name in MAKERS, f"add a maker for scheduler {kind.name!r} to MAKERS"
        assert type(MAKERS[kind.name]()) is kind.cls


@pytest.mark.parametrize("name", sorted(MAKERS))
@pytest.mark.parametrize("seed", range(12))
def test_contract_on_random_streams(name: str, seed: int) -> None:
    rng, twin = random.Random(seed), Twin(MAKERS[name])
    pop = {f"t{i}": info(f"t{i}", state="PENDING", config={"lr": 0.01}) for i in range(10)}
    for trial in pop.values():
        twin("on_trial_add", trial)
    pausing: set[str] = set()  # told to pause, not PAUSED yet
    holding: set[str] = set()  # told to hold: no step until another decision about it
    kinds: set[str] = set()

    def apply(decisions: list[Decision]) -> None:
        assert len({d.trial_id for d in decisions}) == len(decisions)
        for d in decisions:
            now = pop[d.trial_id]
            assert now.state not in ("TERMINATED", "ERROR") or isinstance(d, Stop)
            if isinstance(d, Resume):
                assert now.state == "PAUSED"
            elif isinstance(d, Exploit):
                assert d.checkpoint is not None
                now = dataclasses.replace(now, config=d.config, iteration=d.checkpoint.iteration)
            state = "TERMINATED" if isinstance(d, Stop) else "RUNNING"
            pop[d.trial_id] = dataclasses.replace(now, state=state)
            (pausing.add if isinstance(d, Pause) else pausing.discard)(d.trial_id)
            (holding.add if isinstance(d, Hold) else holding.discard)(d.trial_id)
            kinds.add(type(d).__name__)

    for _ in range(400):
        for tid in [t for t in sorted(pausing) if rng.random() < 0.5]:
            pausing.discard(tid)
            pop[tid] = dataclasses.replace(pop[tid], state="PAUSED")
        running = [t for t, i in pop.items() if i.state in ("RUNNING", "PENDING")]
        running = [t for t in running if t not in pausing and t not in holding]
        if not running:
            if pausing:
                continue
            if not holding and not any(i.state == "PAUSED" for i in pop.values()):
                break
            decisions = twin("on_idle", pop)
            assert decisions, "on_idle left paused or held trials with nobody running"
            apply(decisions)
            continue
        trial = pop[rng.choice(running)]
        if rng.random() < 0.02:
            pop[trial.trial_id] = dataclasses.replace(trial, state="ERROR")
            apply(twin("on_trial_error", pop[trial.trial_id], pop))
            continue
        point = twin("next_decision_at", trial)
        assert point is None or point > trial.iteration
        it = trial.iteration + 1
        result = {
            "training_iteration": it,
            "s": rng.gauss(0, 1) if rng.random() > 0.05 else math.nan,
        }
        checkpoint = Ckpt(trial.trial_id, it) if rng.random() < 0.5 else trial.checkpoint
        trial = dataclasses.replace(
            trial, state="RUNNING", iteration=it, last_result=result, checkpoint=checkpoint
        )
        pop[trial.trial_id] = trial
        if it >= 30:
            pop[trial.trial_id] = dataclasses.replace(trial, state="TERMINATED")
            apply(twin("on_trial_complete", pop[trial.trial_id], result, pop))
        else:
            decisions = twin("on_trial_result", trial, result, pop)
            if any(d.trial_id == trial.trial_id for d in decisions):  # only where announced
                assert point is not None and it >= point
            apply(decisions)
    assert bool(kinds) == (name != "fifo")
