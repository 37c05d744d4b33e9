"""The median stopping rule on synthetic result streams."""

from __future__ import annotations

import math
import pickle
from dataclasses import replace
from typing import Any

import pytest

from orchestrator.errors import ConfigError
from orchestrator.schedulers import Decision, MedianStopping, Pause, Resume, Stop, TrialInfo


class Sim:
    def __init__(self, scheduler: MedianStopping) -> None:
        self.scheduler = scheduler
        self.pop: dict[str, TrialInfo] = {}

    def report(self, tid: str, it: int, value: float) -> list[Decision]:
        if tid not in self.pop:
            self.pop[tid] = TrialInfo(tid, {}, "PENDING", 0, None)
            self.scheduler.on_trial_add(self.pop[tid])
        result = {"training_iteration": it, "score": value}
        info = replace(self.pop[tid], state="RUNNING", iteration=it, last_result=result)
        self.pop[tid] = info
        decisions = self.scheduler.on_trial_result(info, result, self.pop)
        for d in decisions:
            state = {Stop: "TERMINATED", Pause: "PAUSED", Resume: "RUNNING"}[type(d)]
            self.pop[d.trial_id] = replace(self.pop[d.trial_id], state=state)
        return decisions

    def stream(self, tid: str, values: list[float], start: int = 1) -> list[list[Decision]]:
        return [self.report(tid, start + i, v) for i, v in enumerate(values)]


def median(**kwargs: Any) -> Sim:
    kwargs.setdefault("metric", "score")
    kwargs.setdefault("mode", "max")
    kwargs.setdefault("grace_period", 2)
    kwargs.setdefault("min_samples_required", 2)
    return Sim(MedianStopping(**kwargs))


def test_median_of_running_means_hand_computed() -> None:
    sim = median()
    assert sim.stream("a", [1, 2, 3, 4]) == [[]] * 4  # alone: too few samples
    sim.stream("b", [3, 3, 3, 3])
    sim.stream("d", [9])  # only reached t=1: never a sample past it
    # Running means over grace_period <= t' <= t: at 2, a: 2 and b: 3; at 3, a: 2.5.
    assert sim.scheduler.median_at(2, exclude="c") == pytest.approx(2.5)
    assert sim.scheduler.median_at(3, exclude="c") == pytest.approx(2.75)
    assert sim.scheduler.median_at(4, exclude="c") == pytest.approx(3.0)  # a: (2+3+4)/3
    assert sim.report("c", 1, 0.0) == []  # inside the grace period
    assert sim.report("c", 2, 0.0) == [Stop("c")]  # best 0 < 2.5


def test_the_window_starts_at_the_grace_period_and_ties_continue() -> None:
    sim = median()
    sim.stream("a", [1, 2, 3, 4])
    sim.stream("b", [3, 3, 3, 3])
    sim.stream("e", [10, 0, 0, 0])  # its 10 at t=1 is before the window: its mean is 0
    assert sim.scheduler.median_at(2, exclude="f") == pytest.approx(2.0)  # of 2, 3, 0
    # f's best includes its result before the window: 2.0, not worse than 2.0.
    assert sim.stream("f", [2.0, 0.0]) == [[], []]
    # Now the means at 2 are a: 2, b: 3, e: 0, f: 0, so the median is 1.
    assert sim.scheduler.median_at(2, exclude="g") == pytest.approx(1.0)
    assert sim.report("g", 2, 1.0) == []
    assert sim.report("h", 2, 0.9) == [Stop("h")]


def test_min_samples_required() -> None:
    sim = median(min_samples_required=3)
    sim.stream("a", [5, 5, 5])
    sim.stream("b", [5, 5, 5])
    assert sim.stream("c", [0, 0, 0]) == [[]] * 3  # two others only
    assert sim.stream("d", [0, 0, 0]) == [[], [Stop("d")], [Stop("d")]]


def test_min_mode() -> None:
    sim = median(mode="min")
    sim.stream("a", [1, 1, 1])
    sim.stream("b", [2, 2, 2])
    assert sim.scheduler.median_at(2, exclude="c") == pytest.approx(1.5)
    assert sim.stream("c", [5, 5]) == [[], [Stop("c")]]
    assert sim.stream("d", [1.2, 1.2]) == [[], []]


def test_hard_stop_false_pauses_and_on_idle_resumes() -> None:
    sim = median(hard_stop=False)
    sim.stream("a", [5, 5, 5])
    sim.stream("b", [5, 5, 5])
    assert sim.stream("c", [0, 0]) == [[], [Pause("c")]]
    assert sim.pop["c"].state == "PAUSED"
    assert sim.scheduler.next_decision_at(sim.pop["c"]) is None
    assert sim.scheduler.on_idle(sim.pop) == [Resume("c")]
    assert sim.scheduler.on_idle(sim.pop) == []
    assert sim.report("c", 3, 0.0) == []  # decided once: it now runs to its end


def test_grace_period_and_next_decision_at() -> None:
    sim = median(grace_period=3)
    sim.stream("a", [5, 5, 5, 5])
    sim.stream("b", [5, 5, 5, 5])
    first = TrialInfo("c", {}, "PENDING", 0, None)
    assert sim.scheduler.next_decision_at(first) == 3
    assert sim.stream("c", [-9, -9]) == [[], []]
    assert sim.scheduler.next_decision_at(sim.pop["c"]) == 3
    assert sim.report("c", 3, -9) == [Stop("c")]
    assert sim.scheduler.next_decision_at(sim.pop["a"]) == 5  # past grace: current + 1
    assert sim.scheduler.next_decision_at(sim.pop["c"]) is None


def test_nan_makes_the_worst_mean_and_the_worst_best() -> None:
    sim = median()
    sim.stream("a", [1, 2, 3])
    sim.stream("b", [3, 3, 3])
    sim.stream("n", [1, math.nan, 1])
    assert sim.scheduler.median_at(2, exclude="x") == pytest.approx(2.0)  # 2, 3 and -inf
    assert sim.stream("x", [math.nan, math.nan]) == [[], [Stop("x")]]


def test_rereported_results_are_not_recorded_twice() -> None:
    sim = median()
    sim.stream("a", [1, 2, 3, 4])
    before = sim.scheduler.state_dict()
    assert sim.report("a", 3, -50.0) == []  # restarted from an older checkpoint
    assert sim.scheduler.state_dict() == before
    sim.stream("b", [5, 5, 5])
    sim.stream("c", [0, 0])
    assert sim.report("c", 2, 0.0) == [Stop("c")]  # a stopped trial stays stopped


def test_complete_keeps_the_final_result() -> None:
    sim = median()
    sim.stream("a", [4, 4])
    info = replace(sim.pop["a"], state="TERMINATED", iteration=3)
    sim.scheduler.on_trial_complete(info, {"training_iteration": 3, "score": 4.0}, sim.pop)
    sim.stream("b", [4, 4, 4])
    assert sim.scheduler.median_at(3, exclude="c") == pytest.approx(4.0)


def test_results_without_time_or_metric_are_ignored() -> None:
    sim = median()
    info = TrialInfo("a", {}, "RUNNING", 3, None)
    assert sim.scheduler.on_trial_result(info, {"training_iteration": 3}, {}) == []
    assert sim.scheduler.on_trial_result(info, {"score": 1.0}, {}) == []


def test_state_round_trip() -> None:
    sim = median()
    sim.stream("a", [1, 2, 3, 4])
    sim.stream("b", [3, 3])
    state = pickle.loads(pickle.dumps(sim.scheduler.state_dict()))
    copy = Sim(MedianStopping(metric="score", mode="max", grace_period=2, min_samples_required=2))
    copy.scheduler.load_state_dict(state)
    copy.pop = dict(sim.pop)
    stream = [("b", 3, 3), ("c", 1, 0), ("c", 2, 2.4), ("d", 1, 5), ("d", 2, 0), ("b", 4, 3)]
    got = [(sim.report(*e), copy.report(*e)) for e in stream]
    assert all(a == b for a, b in got)
    assert got[2][0] == [Stop("c")] and got[4][0] == []  # median 2.5, then 2.4 at t=2
    assert sim.scheduler.state_dict() == copy.scheduler.state_dict()


def test_defaults() -> None:
    scheduler = MedianStopping()
    assert scheduler.time_attr == "training_iteration"
    assert (scheduler.grace_period, scheduler.min_samples_required) == (5.0, 3)
    assert scheduler.hard_stop is True


@pytest.mark.parametrize(
    "kwargs",
    [
        {"grace_period": -1},
        {"grace_period": "5"},
        {"min_samples_required": 0},
        {"min_samples_required": 1.5},
        {"mode": "median"},
    ],
)
def test_bad_parameters(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        MedianStopping(metric="score", **kwargs)


def test_a_trial_equal_to_the_median_continues_exactly() -> None:
    # Each other trial reports 0.1 then 0.3: its running mean over the window [2, 2] is
    # 0.3, which a prefix sum computed as (0.1 + 0.3) - 0.1 = 0.30000000000000004. x's
    # best, 0.3, equals the median: not strictly worse, so it continues.
    sim = median(min_samples_required=3)
    for tid in ("a", "b", "c"):
        sim.stream(tid, [0.1, 0.3])
    assert sim.scheduler.median_at(2, exclude="x") == 0.3
    assert sim.stream("x", [0.1, 0.3]) == [[], []]
    assert sim.report("y", 2, math.nextafter(0.3, 0)) == [Stop("y")]  # one ulp worse


def test_running_means_are_exact_means_of_the_window() -> None:
    # The mean is the window's exact mean, correctly rounded, whatever came before it
    # (huge, tiny, cancelling values), so equal windows always tie.
    values = [1e300, 0.1, 1e-300, -1e300, 0.3, 0.3, 0.3, 5e-324, 0.7]
    sim = median(grace_period=1, min_samples_required=1)
    sim.stream("a", values)
    from fractions import Fraction

    for end in range(1, len(values) + 1):
        for start in range(1, end + 1):
            window = values[start - 1 : end]
            exact = float(sum(map(Fraction, window)) / len(window))
            history = sim.scheduler._histories["a"]
            assert history.mean(start, end) == exact


def test_a_state_with_float_prefix_sums_still_loads() -> None:
    old = {
        "metric": "score",
        "mode": "max",
        "histories": {
            "a": [[1, 2, 3], [0.0, 1.0, 3.0, 6.0], [0, 0, 0, 0], [0, 0, 0, 0], 3.0],
            "b": [[1, 2, 3], [0.0, 3.0, 6.0, 9.0], [0, 0, 0, 0], [0, 0, 0, 0], 3.0],
        },
        "stopped": [],
        "paused": [],
        "decided": [],
    }
    sim = median()
    sim.scheduler.load_state_dict(old)
    assert sim.scheduler.median_at(3, exclude="c") == pytest.approx(2.75)  # a 2.5, b 3
    assert sim.stream("c", [0, 0]) == [[], [Stop("c")]]
