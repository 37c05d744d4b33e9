"""Tune's stoppers decide as Tune's do (checked against Ray Tune's own classes on the
same results), and RunConfig(stop=...) is split the way the engine runs it."""

from __future__ import annotations

import pickle
import random
from typing import Any

import pytest

from orchestrator.schedulers import Stop, TrialInfo
from orchestrator.tune import stopper as ours
from orchestrator.tune.schedulers import ASHAScheduler, FIFOScheduler


def stream(seed: int, trials: int = 4, steps: int = 30) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(seed)
    out = []
    for step in range(1, steps + 1):
        for t in range(trials):
            value = 1.0 / step + rng.uniform(0, 0.02) * (t + 1)
            out.append((f"t{t}", {"loss": value, "training_iteration": step}))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_plateau_stoppers_decide_as_tunes(seed: int) -> None:
    stopper_mod = pytest.importorskip("ray.tune.stopper")
    pairs = [
        (
            ours.TrialPlateauStopper("loss", std=0.005, num_results=4, grace_period=3),
            stopper_mod.TrialPlateauStopper("loss", std=0.005, num_results=4, grace_period=3),
        ),
        (
            ours.TrialPlateauStopper("loss", std=0.01, metric_threshold=0.2, mode="min"),
            stopper_mod.TrialPlateauStopper("loss", std=0.01, metric_threshold=0.2, mode="min"),
        ),
        (
            ours.ExperimentPlateauStopper("loss", std=0.01, top=4, patience=2),
            stopper_mod.ExperimentPlateauStopper("loss", std=0.01, top=4, patience=2),
        ),
    ]
    for mine, theirs in pairs:
        for trial_id, result in stream(seed):
            assert mine(trial_id, result) == theirs(trial_id, result)
            assert mine.stop_all() == theirs.stop_all()


def test_stop_is_split_into_engine_criteria_driver_stoppers_and_budgets() -> None:
    plan = ours.plan_stop({"done": True, "training_iteration": 10, "loss": 0.5})
    assert plan.engine == {"done": 1.0, "training_iteration": 10.0, "loss": 0.5}
    assert plan.driver is None and plan.budget_s is None
    assert ours.plan_stop(ours.MaximumIterationStopper(7)).engine["training_iteration"] == 7
    fn = ours.plan_stop(lambda trial_id, result: result["loss"] < 0.1).engine
    assert (
        fn("t", {"loss": 0.05}) and fn("t", {"loss": 1, "done": True}) and not fn("t", {"loss": 1})
    )
    plateau = ours.TrialPlateauStopper("loss")
    combined = ours.plan_stop(ours.CombinedStopper(plateau, ours.TimeoutStopper(30)), 60)
    assert combined.driver is not None and combined.budget_s == 30
    assert ours.plan_stop(None, time_budget_s=5).budget_s == 5


def info(trial_id: str, iteration: int) -> TrialInfo:
    return TrialInfo(trial_id, {}, "RUNNING", iteration, None)


def test_a_driver_stopper_runs_before_the_scheduler_on_every_result() -> None:
    ended: list[bool] = []
    scheduler = ASHAScheduler(metric="loss", mode="min", max_t=100)
    scheduler.attach_stopper(
        ours.ExperimentPlateauStopper("loss", top=2), lambda: ended.append(True)
    )
    assert scheduler.next_decision_at(info("a", 3)) == 4.0  # every result is a decision point
    result = {"loss": 1.0, "training_iteration": 1}
    assert scheduler.on_trial_result(info("a", 1), result, {}) == []
    assert scheduler.on_trial_result(info("b", 1), result, {}) == [Stop("b")]  # plateaued
    assert ended == [True]
    fifo = FIFOScheduler()
    fifo.attach_stopper(ours.FunctionStopper(lambda t, r: r["loss"] < 0.5), lambda: None)
    assert fifo.on_trial_result(info("a", 2), {"loss": 0.1}, {}) == [Stop("a")]


def test_asha_draws_tunes_bracket_from_numpys_global_rng() -> None:
    """Tune's ASHA draws a bracket per trial from NumPy's global RNG, between its
    searcher's draws; so must ours, for a seeded script to sample Tune's configs."""
    import numpy as np

    np.random.seed(3)
    np.random.choice(1, p=[1.0])
    expected = np.random.random()
    np.random.seed(3)
    scheduler = ASHAScheduler(metric="loss", mode="min")
    scheduler.on_trial_add(info("a", 0))
    scheduler.on_trial_add(info("a", 0))  # the same trial again: no second draw
    assert np.random.random() == expected


class _Clock:
    """A clock the test moves by hand: the stopper's budget must not depend on speed."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_a_timeout_stopper_spends_its_budget_and_keeps_the_rest_across_a_pickle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = _Clock()
    monkeypatch.setattr(ours, "time", clock)
    stopper = ours.TimeoutStopper(60)
    assert not stopper.stop_all()  # the first check starts the budget
    clock.now += 40
    assert not stopper.stop_all()
    saved = pickle.dumps(stopper)
    clock.now += 500  # time spent pickled does not count, as on Tune
    restored = pickle.loads(saved)
    assert not restored.stop_all()
    assert ours.plan_stop(restored).budget_s == pytest.approx(20)  # the run's timer too
    clock.now += 10
    assert not restored.stop_all()
    clock.now += 11
    assert restored.stop_all()
    spent = pickle.loads(pickle.dumps(restored))
    clock.now += 100
    assert spent.stop_all() and ours.plan_stop(spent).budget_s == 0.0  # still spent
