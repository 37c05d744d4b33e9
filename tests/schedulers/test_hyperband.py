"""Synchronous HyperBand on synthetic result streams."""

from __future__ import annotations

import pickle
from dataclasses import replace
from typing import Any

import pytest

from orchestrator.errors import ConfigError
from orchestrator.schedulers import Decision, HyperBand, Pause, Resume, Stop, TrialInfo


class Sim:
    """A population the tests drive by hand. ``apply=False`` leaves decisions unapplied
    (a pause that has not landed yet)."""

    def __init__(self, scheduler: HyperBand, ids: list[str] | None = None) -> None:
        self.scheduler = scheduler
        self.pop: dict[str, TrialInfo] = {}
        for tid in ids or []:
            self.add(tid)

    def add(self, tid: str) -> None:
        self.pop[tid] = TrialInfo(tid, {}, "PENDING", 0, None)
        self.scheduler.on_trial_add(self.pop[tid])

    def report(self, tid: str, it: int, value: float, apply: bool = True) -> list[Decision]:
        result = {"training_iteration": it, "score": value}
        info = replace(self.pop[tid], state="RUNNING", iteration=it, last_result=result)
        self.pop[tid] = info
        return self.apply(self.scheduler.on_trial_result(info, result, self.pop), apply)

    def error(self, tid: str) -> list[Decision]:
        self.pop[tid] = replace(self.pop[tid], state="ERROR")
        return self.apply(self.scheduler.on_trial_error(self.pop[tid], self.pop))

    def idle(self) -> list[Decision]:
        return self.apply(self.scheduler.on_idle(self.pop))

    def apply(self, decisions: list[Decision], apply: bool = True) -> list[Decision]:
        ids = [d.trial_id for d in decisions]
        assert len(ids) == len(set(ids)), "at most one decision per trial"
        states = {Pause: "PAUSED", Stop: "TERMINATED", Resume: "RUNNING"}
        for d in decisions:
            if isinstance(d, Resume):
                assert self.pop[d.trial_id].state == "PAUSED"
            if apply:
                self.pop[d.trial_id] = replace(self.pop[d.trial_id], state=states[type(d)])
        return decisions

    def state(self, tid: str) -> str:
        return self.pop[tid].state


def hyperband(**kwargs: Any) -> HyperBand:
    kwargs.setdefault("metric", "score")
    kwargs.setdefault("mode", "max")
    return HyperBand(**kwargs)


def by_kind(decisions: list[Decision]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for d in decisions:
        out.setdefault(type(d).__name__, set()).add(d.trial_id)
    return out


def test_bracket_plan_for_max_t_81_eta_3_matches_the_paper() -> None:
    scheduler = hyperband(max_t=81, reduction_factor=3)
    assert scheduler.s_max == 4
    # (s, n_i, r_i): n_0 and r_i as in the Hyperband paper's Table 1 and Ray Tune; the
    # survivors n_i use Ray Tune's ceil(n / eta) (the paper: 34-11-3-1, 15-5-1, 8-2).
    assert scheduler.bracket_plan() == [
        (4, [81, 27, 9, 3, 1], [1, 3, 9, 27, 81]),
        (3, [34, 12, 4, 2], [3, 9, 27, 81]),
        (2, [15, 5, 2], [9, 27, 81]),
        (1, [8, 3], [27, 81]),
        (0, [5], [81]),
    ]


def test_plan_rounding_when_max_t_is_no_power_of_eta() -> None:
    # s_max = round(log3(100)) = 4; r_i = floor(100 / 3**(s - i)), the last one max_t.
    assert hyperband(max_t=100)._milestones[4] == [1, 3, 11, 33, 100]
    # round(log3(50)) = 4, but 50 / 81 rounds down to 0: that bracket is skipped.
    assert [s for s, _, _ in hyperband(max_t=50).bracket_plan()] == [3, 2, 1, 0]


def test_trials_fill_brackets_in_order() -> None:
    # max_t=9, eta=3: brackets (s=2, n=9, r=1-3-9), (s=1, n=5, r=3-9), (s=0, n=3, r=9).
    sim = Sim(hyperband(max_t=9), [f"t{i}" for i in range(18)])
    assert [sim.scheduler.bracket_of(f"t{i}") for i in range(18)] == [0] * 9 + [1] * 5 + [2] * 3 + [
        3
    ]
    assert sim.scheduler.bracket_plan()[0] == (2, [9, 3, 1], [1, 3, 9])


def test_a_full_bracket_halves_at_each_milestone() -> None:
    ids = [f"t{i}" for i in range(9)]
    sim = Sim(hyperband(max_t=9), ids)
    for i, tid in enumerate(ids[:-1]):
        assert sim.report(tid, 1, float(i)) == [Pause(tid)]
        assert sim.scheduler.next_decision_at(sim.pop[tid]) == 3
    # The last one completes the bracket: the top 9 / 3 = 3 go on (t8 itself, running,
    # gets no decision: Continue), the other six stop.
    decisions = sim.report("t8", 1, 8.0)
    assert by_kind(decisions) == {"Resume": {"t6", "t7"}, "Stop": set(ids[:6])}
    assert sim.scheduler.next_decision_at(sim.pop["t8"]) == 3
    for tid in ("t6", "t8"):
        assert sim.report(tid, 2, 0.0) == []
        assert sim.report(tid, 3, {"t6": 5.0, "t8": 1.0}[tid]) == [Pause(tid)]
    # ceil(3 / 3) = 1 goes on: t6 (5.0); t7 (2.0, the reporter) and t8 (1.0) stop.
    assert by_kind(sim.report("t7", 3, 2.0)) == {"Resume": {"t6"}, "Stop": {"t7", "t8"}}
    assert sim.state("t7") == "TERMINATED" and sim.state("t6") == "RUNNING"
    assert sim.scheduler.next_decision_at(sim.pop["t6"]) == 9
    assert sim.report("t6", 8, 0.0) == []
    assert sim.report("t6", 9, 0.0) == [Stop("t6")]  # max_t


def test_min_mode_keeps_the_lowest() -> None:
    sim = Sim(hyperband(max_t=9, mode="min"), [f"t{i}" for i in range(9)])
    for i in range(9):
        decisions = sim.report(f"t{i}", 1, float(i))
    assert by_kind(decisions)["Resume"] == {"t0", "t1", "t2"}
    assert Stop("t8") in decisions


def test_an_errored_trial_leaves_its_bracket() -> None:
    sim = Sim(hyperband(max_t=9), [f"t{i}" for i in range(14)])  # t9..t13: s=1, n=5, r=3
    for i in range(9, 13):
        assert sim.report(f"t{i}", 3, float(i)) == [Pause(f"t{i}")]
    # The fifth errs: the four paused ones now make up the bracket; ceil(5 / 3) = 2 go on.
    assert by_kind(sim.error("t13")) == {"Resume": {"t11", "t12"}, "Stop": {"t9", "t10"}}


def test_a_trial_that_ends_by_itself_leaves_its_bracket() -> None:
    sim = Sim(hyperband(max_t=9), [f"t{i}" for i in range(9)])
    for i in range(8):
        sim.report(f"t{i}", 1, float(i))
    sim.pop["t8"] = replace(sim.pop["t8"], state="TERMINATED")
    decisions = sim.scheduler.on_trial_complete(sim.pop["t8"], None, sim.pop)
    assert by_kind(decisions) == {"Resume": {"t5", "t6", "t7"}, "Stop": {f"t{i}" for i in range(5)}}


def test_on_idle_settles_a_partial_bracket() -> None:
    sim = Sim(hyperband(max_t=9), ["a", "b", "c", "d"])  # a bracket for 9 got 4
    for tid, value in zip("abcd", [3.0, 1.0, 4.0, 2.0], strict=True):
        assert sim.report(tid, 1, value) == [Pause(tid)]
    # It closes with 4 trials: ceil(4 / 3) = 2 go on.
    assert by_kind(sim.idle()) == {"Resume": {"a", "c"}, "Stop": {"b", "d"}}
    sim.add("e")  # a late trial opens the next bracket, it does not join a settled one
    assert sim.scheduler.bracket_of("e") == 1
    for tid, value in (("a", 1.0), ("c", 2.0)):
        sim.report(tid, 3, value)
    assert sim.state("a") == "TERMINATED" and sim.state("c") == "RUNNING"


def test_resume_waits_until_the_pause_has_landed() -> None:
    sim = Sim(hyperband(max_t=9), [f"t{i}" for i in range(9)])
    sim.report("t0", 1, 10.0, apply=False)  # told to pause, still RUNNING (saving)
    for i in range(1, 8):
        sim.report(f"t{i}", 1, float(i))
    decisions = sim.report("t8", 1, 0.0)
    assert by_kind(decisions) == {
        "Resume": {"t6", "t7"},
        "Stop": {f"t{i}" for i in range(1, 6)} | {"t8"},
    }
    assert sim.idle() == []  # t0 is not paused yet: no Resume for it
    sim.pop["t0"] = replace(sim.pop["t0"], state="PAUSED")
    assert sim.idle() == [Resume("t0")]
    assert sim.idle() == []


def test_a_rereported_milestone_keeps_its_first_record() -> None:
    sim = Sim(hyperband(max_t=9), [f"t{i}" for i in range(9)])
    sim.report("t0", 1, 100.0)
    # t0 is restarted after a failure and reaches the milestone again, worse this time.
    assert sim.report("t0", 1, -100.0) == [Pause("t0")]
    for i in range(1, 9):
        decisions = sim.report(f"t{i}", 1, float(i))
    assert "t0" in by_kind(decisions)["Resume"]


def test_a_trial_already_past_the_next_milestone_stays_paused() -> None:
    sim = Sim(hyperband(max_t=9), [f"t{i}" for i in range(9)])
    sim.report("t0", 4, 100.0)  # a coarse time_attr: it jumped past milestones 1 and 3
    for i in range(1, 8):
        sim.report(f"t{i}", 1, float(i))
    decisions = sim.report("t8", 1, 8.0)
    # t0, t8, t7 go on; t0 is already at 3 and waits there for the two others.
    assert by_kind(decisions) == {"Resume": {"t7"}, "Stop": {f"t{i}" for i in range(1, 7)}}
    assert sim.state("t0") == "PAUSED"
    sim.report("t7", 3, 1.0)
    assert by_kind(sim.report("t8", 3, 2.0)) == {"Resume": {"t0"}, "Stop": {"t7", "t8"}}


def test_stop_last_trials_false_trains_on_past_max_t() -> None:
    sim = Sim(hyperband(max_t=9, stop_last_trials=False), ["a", "b", "c"])
    for tid in "abc":
        sim.report(tid, 1, 1.0)
    sim.idle()  # keeps ceil(3 / 3) = 1: "a" (ties go to the first added)
    sim.report("a", 3, 1.0)
    sim.idle()
    assert sim.state("a") == "RUNNING"
    assert sim.scheduler.next_decision_at(sim.pop["a"]) is None
    assert sim.report("a", 9, 1.0) == [] and sim.report("a", 20, 1.0) == []


def test_next_decision_at() -> None:
    sim = Sim(hyperband(max_t=81), ["a"])
    assert sim.scheduler.next_decision_at(sim.pop["a"]) == 1
    assert sim.scheduler.next_decision_at(TrialInfo("x", {}, "PENDING", 0, None)) == 1
    sim.report("a", 1, 1.0)
    assert sim.scheduler.next_decision_at(sim.pop["a"]) == 3  # paused at 1: 3 is next


def test_state_round_trip_mid_run() -> None:
    ids = [f"t{i}" for i in range(9)]
    original = Sim(hyperband(max_t=9), ids)
    for i in range(5):
        original.report(f"t{i}", 1, float(i))
    state = pickle.loads(pickle.dumps(original.scheduler.state_dict()))
    copy = Sim(hyperband(max_t=9))
    copy.scheduler.load_state_dict(state)
    copy.pop = dict(original.pop)
    stream = [(f"t{i}", 1, float(i)) for i in range(5, 9)]
    stream += [("t6", 3, 1.0), ("t8", 3, 3.0), ("t7", 3, 2.0)]
    got = [(original.report(*e), copy.report(*e)) for e in stream]
    assert all(a == b for a, b in got)
    assert by_kind(got[-1][0]) == {"Resume": {"t8"}, "Stop": {"t6", "t7"}}
    assert original.scheduler.state_dict() == copy.scheduler.state_dict()


@pytest.mark.parametrize(
    "kwargs",
    [{"max_t": 0}, {"max_t": -1}, {"reduction_factor": 1}, {"reduction_factor": "3"}],
)
def test_bad_parameters(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        hyperband(**kwargs)


def test_objective_is_required() -> None:
    with pytest.raises(ConfigError, match="metric"):
        HyperBand().on_trial_add(TrialInfo("a", {}, "PENDING", 0, None))
