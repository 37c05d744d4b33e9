"""ASHA on synthetic result streams, against hand-computed rungs and cutoffs."""

from __future__ import annotations

import math
import pickle
import random
from dataclasses import replace
from typing import Any

import pytest

from orchestrator.errors import ConfigError
from orchestrator.schedulers import ASHA, Decision, Stop, TrialInfo
from orchestrator.schedulers.asha import nanpercentile


class Sim:
    """A population the tests drive by hand: reports results, applies decisions."""

    def __init__(self, scheduler: ASHA, ids: list[str] | None = None) -> None:
        self.scheduler = scheduler
        self.pop: dict[str, TrialInfo] = {}
        for tid in ids or []:
            self.add(tid)

    def add(self, tid: str) -> None:
        self.pop[tid] = TrialInfo(tid, {}, "PENDING", 0, None)
        self.scheduler.on_trial_add(self.pop[tid])

    def report(self, tid: str, it: float, value: float, **extra: Any) -> list[Decision]:
        result = {"training_iteration": it, "score": value, **extra}
        info = replace(self.pop[tid], state="RUNNING", iteration=int(it), last_result=result)
        self.pop[tid] = info
        decisions = self.scheduler.on_trial_result(info, result, self.pop)
        for d in decisions:
            if isinstance(d, Stop):
                self.pop[d.trial_id] = replace(self.pop[d.trial_id], state="TERMINATED")
        return decisions


def asha(**kwargs: Any) -> ASHA:
    kwargs.setdefault("metric", "score")
    kwargs.setdefault("mode", "max")
    return ASHA(**kwargs)


# -- the quantile helper --------------------------------------------------------------


def test_nanpercentile_hand_computed() -> None:
    # rf=3: the 66.67th percentile of [1, 2, 3, 4]: index 3 * 2/3 = 2 -> 3.
    assert nanpercentile([4, 1, 3, 2], 100 * (1 - 1 / 3)) == pytest.approx(3.0)
    assert nanpercentile([1, 2, 3, 4], 75) == pytest.approx(3.25)  # index 2.25
    assert nanpercentile([10, 20], 75) == pytest.approx(17.5)
    assert nanpercentile([1, 2, 2.9, 3, 4], 100 * 2 / 3) == pytest.approx(2.9 + 0.1 * 2 / 3)
    assert nanpercentile([5], 75) == 5
    assert nanpercentile([1, 3], 0) == 1 and nanpercentile([1, 3], 100) == 3
    assert nanpercentile([math.nan, 1, 3], 50) == pytest.approx(2.0)  # NaN ignored
    assert math.isnan(nanpercentile([], 50)) and math.isnan(nanpercentile([math.nan], 50))
    assert nanpercentile([1, math.inf], 50) == math.inf
    assert nanpercentile([-math.inf, 1], 50) == -math.inf


def test_nanpercentile_agrees_with_numpy() -> None:
    np = pytest.importorskip("numpy")
    rng = random.Random(0)
    for _ in range(300):
        values = [rng.uniform(-10, 10) for _ in range(rng.randint(1, 12))]
        if rng.random() < 0.3:
            values.append(math.nan)
        percent = rng.choice([25.0, 50.0, 75.0, 100 * (1 - 1 / 3), rng.uniform(0, 100)])
        assert nanpercentile(values, percent) == float(np.nanpercentile(values, percent))


# -- rungs and cutoffs ----------------------------------------------------------------


def test_rung_milestones() -> None:
    assert asha(max_t=100, grace_period=1, reduction_factor=4, brackets=3).rungs == [
        [1, 4, 16, 64],
        [4, 16, 64],
        [16, 64],
    ]
    assert asha(max_t=64, grace_period=1, reduction_factor=4).rungs == [[1, 4, 16]]  # < max_t
    assert asha(max_t=81, grace_period=1, reduction_factor=3).rungs == [[1, 3, 9, 27]]
    assert asha(max_t=20, grace_period=5, reduction_factor=2).rungs == [[5, 10]]


def test_cutoff_with_rf3_over_four_recorded_values() -> None:
    sim = Sim(asha(max_t=100, grace_period=1, reduction_factor=3), ["a", "b", "c", "d", "e"])
    # Ascending arrivals: each is at or above the cutoff of the values recorded so far
    # (its own included): [1] -> 1, [1, 2] -> 1.67, [1, 2, 3] -> 2.33, [1..4] -> 3.
    for tid, value in zip("abcd", [1, 2, 3, 4], strict=True):
        assert sim.report(tid, 1, value) == []
    assert sim.scheduler.cutoff(0, 0) == pytest.approx(3.0)
    # [1, 2, 2.9, 3, 4]: index (5 - 1) * 2/3 = 2.67 -> 2.9 + 0.67 * 0.1 = 2.967 > 2.9.
    assert sim.report("e", 1, 2.9) == [Stop("e")]
    assert sim.scheduler.cutoff(0, 0) == pytest.approx(2.9 + 0.1 * 2 / 3)


def test_descending_arrivals_stop_all_but_the_first() -> None:
    sim = Sim(asha(reduction_factor=3), ["a", "b", "c"])
    assert sim.report("a", 1, 4) == []
    assert sim.report("b", 1, 3) == [Stop("b")]  # [3, 4] -> 3.67
    assert sim.report("c", 1, 3.4) == [Stop("c")]  # [3, 3.4, 4] -> 3.4 + 0.33 * 0.6 = 3.6


def test_stopped_exactly_at_the_rung_never_before_or_after() -> None:
    sim = Sim(asha(max_t=100, grace_period=4, reduction_factor=4), ["good", "bad"])
    for it in range(1, 5):
        assert sim.report("good", it, 10.0) == []
    for it in range(1, 4):
        assert sim.report("bad", it, 0.0) == []
        assert sim.scheduler.next_decision_at(sim.pop["bad"]) == 4
    assert sim.report("bad", 4, 0.0) == [Stop("bad")]  # [0, 10] at 75%: 7.5
    assert sim.scheduler.next_decision_at(sim.pop["bad"]) is None
    assert sim.report("bad", 5, 0.0) == [Stop("bad")]  # a late result: the decision stands


def test_min_mode_mirrors_max() -> None:
    sim = Sim(asha(mode="min", max_t=100, grace_period=1, reduction_factor=4), ["a", "b", "c"])
    assert sim.report("a", 1, 1.0) == []
    # Raw losses [1, 5]: stop above the 25th percentile, 1 + 0.25 * 4 = 2.
    assert sim.report("b", 1, 5.0) == [Stop("b")]
    assert sim.scheduler.cutoff(0, 0) == pytest.approx(2.0)
    # [1, 1.5, 5] at 25%: index 0.5 -> 1.25, and 1.5 is above it; 1.2 would not be.
    assert sim.report("c", 1, 1.5) == [Stop("c")]
    assert sim.scheduler.cutoff(0, 0) == pytest.approx(1.25)


def test_min_mode_cutoff_hand_computed() -> None:
    sim = Sim(asha(mode="min", reduction_factor=4), ["a", "b", "c", "d"])
    for tid, loss in zip("abc", [1.0, 2.0, 3.0], strict=True):
        sim.report(tid, 1, loss)
    assert sim.scheduler.cutoff(0, 0) == pytest.approx(1.5)  # raw [1, 2, 3] at 25%: 1.5
    assert sim.report("d", 1, 1.6) == [Stop("d")]  # [1, 1.6, 2, 3] at 25%: 1.45


def test_max_t_stops_unless_stop_last_trials_is_false() -> None:
    sim = Sim(asha(max_t=10, grace_period=1, reduction_factor=4), ["a"])
    assert [sim.report("a", it, 1.0) for it in range(1, 10)] == [[]] * 9
    assert sim.report("a", 10, 1.0) == [Stop("a")]
    sim = Sim(asha(max_t=10, stop_last_trials=False), ["a"])
    assert sim.report("a", 4, 1.0) == [] and sim.report("a", 10, 1.0) == []
    assert sim.scheduler.next_decision_at(sim.pop["a"]) is None


def test_rereport_after_failure_is_not_recorded_twice() -> None:
    sim = Sim(asha(max_t=100, grace_period=4, reduction_factor=4), ["a", "b"])
    sim.report("a", 4, 10.0)
    sim.report("b", 4, 9.0)  # [9, 10] at 75%: 9.75: b stops
    assert sim.scheduler.cutoff(0, 0) == pytest.approx(9.75)
    before = sim.scheduler.state_dict()["records"]
    # "a" restarts from its checkpoint at 2 and reaches rung 4 again, with another value.
    assert sim.report("a", 3, 0.0) == []
    assert sim.report("a", 4, 0.0) == []  # same outcome as the first time: it continues
    assert sim.scheduler.state_dict()["records"] == before


def test_jump_over_rungs_records_the_highest_only() -> None:
    sim = Sim(asha(max_t=100, grace_period=1, reduction_factor=4), ["a"])
    sim.report("a", 20, 1.0)  # passes rungs 1, 4 and 16 at once
    records = sim.scheduler.state_dict()["records"][0]
    assert records == [{}, {}, {"a": 1.0}, {}]
    assert sim.scheduler.next_decision_at(sim.pop["a"]) == 64


def test_nan_ranks_worst() -> None:
    sim = Sim(asha(reduction_factor=4), ["a", "b", "c"])
    assert sim.report("a", 1, math.nan) == []  # alone: nothing to compare with
    assert sim.report("b", 1, -100.0) == []
    assert sim.report("c", 1, math.nan) == [Stop("c")]
    assert sim.scheduler.cutoff(0, 0) == -100.0  # NaNs leave the percentile alone


def test_results_without_time_or_metric_are_ignored() -> None:
    scheduler = asha()
    info = TrialInfo("a", {}, "RUNNING", 1, None)
    scheduler.on_trial_add(info)
    assert scheduler.on_trial_result(info, {"training_iteration": 1}, {"a": info}) == []
    assert scheduler.on_trial_result(info, {"score": 1.0}, {"a": info}) == []
    assert scheduler.on_trial_result(info, {"training_iteration": 1, "score": "x"}, {}) == []


def test_next_decision_at() -> None:
    sim = Sim(asha(max_t=100, grace_period=4, reduction_factor=4), ["a"])
    assert sim.scheduler.next_decision_at(sim.pop["a"]) == 4
    sim.report("a", 4, 1.0)
    assert sim.scheduler.next_decision_at(sim.pop["a"]) == 16
    sim.report("a", 64, 1.0)
    assert sim.scheduler.next_decision_at(sim.pop["a"]) == 100  # max_t
    unknown = TrialInfo("x", {}, "PENDING", 0, None)
    assert sim.scheduler.next_decision_at(unknown) == 4


def test_complete_records_the_final_result() -> None:
    sim = Sim(asha(reduction_factor=4), ["a", "b"])
    info = replace(sim.pop["a"], iteration=1)
    assert sim.scheduler.on_trial_complete(info, {"training_iteration": 1, "score": 5}, {}) == []
    assert sim.report("b", 1, 1.0) == [Stop("b")]


def test_brackets_are_drawn_seeded_with_ray_tunes_weights() -> None:
    ids = [f"t{i}" for i in range(3000)]
    first = Sim(asha(brackets=3, seed=7), ids).scheduler
    second = Sim(asha(brackets=3, seed=7), ids).scheduler
    picks = [first.bracket_of(t) for t in ids]
    assert picks == [second.bracket_of(t) for t in ids]
    # Rung counts 4, 3, 2 -> weights e^0, e^-1, e^-2 (softmax): 0.665, 0.245, 0.090.
    total = sum(math.exp(-k) for k in range(3))
    for bracket in range(3):
        share = picks.count(bracket) / len(ids)
        assert share == pytest.approx(math.exp(-bracket) / total, abs=0.03)


def test_state_round_trip_gives_identical_decisions() -> None:
    def stream(seed: int) -> list[tuple[str, int, float]]:
        rng = random.Random(seed)
        return [(f"t{rng.randrange(12)}", it, rng.random()) for it in range(1, 60)]

    kwargs: dict[str, Any] = {"max_t": 50, "grace_period": 1, "reduction_factor": 2}
    original = Sim(asha(brackets=3, seed=1, **kwargs), [f"t{i}" for i in range(6)])
    for tid, it, value in stream(1):
        if tid in original.pop:
            original.report(tid, it, value)
    state = pickle.loads(pickle.dumps(original.scheduler.state_dict()))
    copy = Sim(asha(brackets=3, seed=1, **kwargs))
    copy.scheduler.load_state_dict(state)
    copy.pop = dict(original.pop)
    later = stream(2)
    for sim in (original, copy):
        for tid in [f"t{i}" for i in range(6, 12)]:
            sim.add(tid)  # new trials draw brackets from the restored RNG
    got = [[original.report(*e), copy.report(*e)] for e in later]
    assert all(a == b for a, b in got) and any(a for a, _ in got)
    assert original.scheduler.state_dict() == copy.scheduler.state_dict()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_t": 0},
        {"max_t": -5},
        {"grace_period": 0},
        {"grace_period": 200},
        {"reduction_factor": 1},
        {"reduction_factor": 0.5},
        {"brackets": 0},
        {"brackets": 1.5},
        {"mode": "avg"},
        {"max_t": True},
    ],
)
def test_bad_parameters(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        asha(**kwargs)


def test_objective_is_required() -> None:
    scheduler = ASHA()
    with pytest.raises(ConfigError, match="metric"):
        scheduler.on_trial_add(TrialInfo("a", {}, "PENDING", 0, None))
    with pytest.raises(ConfigError, match="mode"):
        scheduler.set_search_properties("score", None)
    scheduler = ASHA(mode="min")
    scheduler.set_search_properties("loss", "max")  # the constructor's mode wins
    assert (scheduler.metric, scheduler.mode) == ("loss", "min")


def test_a_result_at_max_t_is_recorded_at_the_rung_its_earlier_results_missed() -> None:
    # Rungs at 1, 2 and 4, max_t 5. a's results at the rungs lack the metric, so its
    # first scored result (at max_t) passes all three: it is recorded at rung 4 (the
    # highest), as a result jumping over rungs is, and stopped because it is at max_t.
    # Before, the max_t stop skipped the record and on_trial_complete skipped stopped
    # trials: a never counted, and b (worse than a) went on alone. Ray Tune's
    # AsyncHyperBandScheduler stops b at 4 on this stream too.
    sim = Sim(asha(max_t=5, grace_period=1, reduction_factor=2), ["a", "b"])
    for it in (1, 2, 4):
        result: dict[str, Any] = {"training_iteration": it}
        info = replace(sim.pop["a"], state="RUNNING", iteration=it, last_result=result)
        assert sim.scheduler.on_trial_result(info, result, sim.pop) == []
    assert sim.report("a", 5, 10.0) == [Stop("a")]
    assert sim.scheduler.state_dict()["records"][0] == [{}, {}, {"a": 10.0}]
    sim.scheduler.on_trial_complete(sim.pop["a"], sim.pop["a"].last_result, sim.pop)
    assert sim.scheduler.state_dict()["records"][0] == [{}, {}, {"a": 10.0}]  # once
    assert sim.report("b", 1, 5.0) == []  # alone at rungs 1 and 2
    assert sim.report("b", 2, 5.0) == []
    assert sim.report("b", 4, 5.0) == [Stop("b")]  # below a's 10 at rung 4


@pytest.mark.parametrize(("mode", "diverged"), [("max", math.inf), ("min", -math.inf)])
def test_a_diverged_trial_is_never_the_best_at_a_rung(mode: str, diverged: float) -> None:
    """An infinity in the direction the mode favours is a diverged trial, not a record:
    it must not set the rung's cutoff that stops an ordinary trial (one rule for best:
    a non-finite value never counts)."""
    sim = Sim(asha(mode=mode, reduction_factor=2), ["wild", "sane"])
    assert sim.report("wild", 1, diverged) == []
    assert sim.report("sane", 1, 1.0 if mode == "max" else -1.0) == []
