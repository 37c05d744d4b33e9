"""Population-based training: quantiles, exploit, explore, synch barriers, lineage."""

from __future__ import annotations

import math
import pickle
import random
from dataclasses import dataclass, replace
from typing import Any

import pytest

from orchestrator.errors import ConfigError
from orchestrator.schedulers import PBT, Continue, Decision, Exploit, Hold, Pause, Resume, TrialInfo
from orchestrator.schedulers.pbt import _quantiles


@dataclass(frozen=True)
class Ckpt:
    trial_id: str
    iteration: int


class Domain:
    """A search-space domain stand-in: anything with ``sample(rng)``."""

    def __init__(self, value: float) -> None:
        self.value = value

    def sample(self, rng: random.Random) -> float:
        return self.value


def trial(tid: str, score: float | None, it: int = 10, **kwargs: Any) -> TrialInfo:
    result = None if score is None else {"training_iteration": it, "score": score}
    ckpt = kwargs.pop("ckpt", True)
    return TrialInfo(
        tid,
        kwargs.pop("config", {"lr": 0.01, "layers": 3}),
        kwargs.pop("state", "RUNNING"),
        it,
        result,
        Ckpt(tid, it) if ckpt is True else ckpt,
    )


def population(scores: dict[str, float], it: int = 10) -> dict[str, TrialInfo]:
    return {tid: trial(tid, score, it) for tid, score in scores.items()}


def report(pbt: PBT, pop: dict[str, TrialInfo], tid: str, it: int, score: float) -> list[Decision]:
    result = {"training_iteration": it, "score": score}
    info = replace(pop[tid], state="RUNNING", iteration=it, last_result=result)
    pop[tid] = info
    decisions = pbt.on_trial_result(info, result, pop)
    for d in decisions:
        state = "PAUSED" if isinstance(d, Pause) else "RUNNING"
        pop[d.trial_id] = replace(pop[d.trial_id], state=state)
    return decisions


def pbt(**kwargs: Any) -> PBT:
    kwargs.setdefault("metric", "score")
    kwargs.setdefault("mode", "max")
    kwargs.setdefault("perturbation_interval", 10)
    kwargs.setdefault("hyperparam_mutations", {"lr": Domain(0.5)})
    return PBT(**kwargs)


# -- quantiles and exploit ------------------------------------------------------------


def test_quantile_membership() -> None:
    four = [("a", 1.0), ("b", 2.0), ("c", 3.0), ("d", 4.0)]
    assert _quantiles(four, 0.25) == (["a"], ["d"])  # ceil(4 * 0.25) = 1
    eight = [(f"t{i}", float(i)) for i in range(1, 9)]
    assert _quantiles(eight, 0.25) == (["t1", "t2"], ["t7", "t8"])
    assert _quantiles(four[:3], 0.5) == (["a"], ["c"])  # ceil(1.5) = 2 > 3 / 2: 1
    assert _quantiles(four[:2], 0.25) == (["a"], ["b"])
    assert _quantiles(four[:1], 0.5) == ([], [])


def test_population_of_four_exploits_the_best() -> None:
    scheduler = pbt()
    pop = population({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})
    assert report(scheduler, pop, "b", 10, 2.0) == []
    [decision] = report(scheduler, pop, "a", 10, 1.0)
    assert isinstance(decision, Exploit) and decision.trial_id == "a"
    assert decision.donor_id == "d" and decision.checkpoint == Ckpt("d", 10)
    # The donor's config, explored: lr scaled by 1.2 or 0.8, or resampled (0.5).
    assert decision.config["layers"] == 3 and decision.config["lr"] in (0.012, 0.008, 0.5)


def test_population_of_eight_picks_donors_from_the_top_quarter_only() -> None:
    donors = set()
    for seed in range(40):
        scheduler = pbt(seed=seed)
        pop = population({f"t{i}": float(i) for i in range(1, 9)})
        assert report(scheduler, pop, "t3", 10, 3.0) == []
        assert report(scheduler, pop, "t6", 10, 6.0) == []
        for tid in ("t1", "t2"):
            [decision] = report(scheduler, pop, tid, 10, float(tid[1]))
            assert isinstance(decision, Exploit)
            donors.add(decision.donor_id)
    assert donors == {"t7", "t8"}


def test_never_a_donor_without_a_checkpoint() -> None:
    for seed in range(30):
        scheduler = pbt(seed=seed)
        pop = population({f"t{i}": float(i) for i in range(1, 9)})
        pop["t8"] = replace(pop["t8"], checkpoint=None)
        [decision] = report(scheduler, pop, "t1", 10, 1.0)
        assert isinstance(decision, Exploit) and decision.donor_id == "t7"
    pop["t7"] = replace(pop["t7"], checkpoint=None)
    assert report(pbt(), pop, "t1", 10, 1.0) == []  # no donor: nothing happens


def test_without_a_donor_yet_the_trial_asks_again_until_its_next_boundary() -> None:
    scheduler = pbt(seed=0)
    pop = population({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}, it=9)
    pop = {tid: replace(info, checkpoint=None) for tid, info in pop.items()}
    assert report(scheduler, pop, "a", 10, 1.0) == []  # first at boundary 10: no donor
    pop["a"] = replace(pop["a"], iteration=10)
    assert scheduler.next_decision_at(pop["a"]) == math.nextafter(10, math.inf)  # the next
    assert report(scheduler, pop, "a", 11, 1.0) == []
    pop["d"] = replace(pop["d"], checkpoint=Ckpt("d", 10))  # d's checkpoint 10 persisted
    [decision] = report(scheduler, pop, "a", 12, 1.0)
    assert isinstance(decision, Exploit) and decision.checkpoint == Ckpt("d", 10)
    pop["a"] = replace(pop["a"], iteration=10)  # restored from it
    assert report(scheduler, pop, "a", 11, 1.0) == []  # boundary 10 is decided
    assert scheduler.next_decision_at(pop["a"]) == 20
    assert len(scheduler.lineage) == 1


def test_ended_trials_and_trials_without_results_do_not_rank() -> None:
    pop = population({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})
    pop["d"] = replace(pop["d"], state="TERMINATED")
    pop["e"] = trial("e", None, it=0)
    [decision] = report(pbt(), pop, "a", 10, 1.0)  # 3 ranked: 1 in each quantile
    assert isinstance(decision, Exploit) and decision.donor_id == "c"


def test_min_mode_and_nan_ranks_worst() -> None:
    pop = population({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})
    [decision] = report(pbt(mode="min"), pop, "d", 10, 4.0)
    assert isinstance(decision, Exploit) and decision.donor_id == "a"
    pop = population({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})
    [decision] = report(pbt(), pop, "c", 10, float("nan"))
    assert isinstance(decision, Exploit) and decision.donor_id == "d"


# -- explore --------------------------------------------------------------------------


def explored(
    mutations: dict[str, Any], config: dict[str, Any], seeds: int = 40, **kw: Any
) -> list[Any]:
    return [pbt(hyperparam_mutations=mutations, seed=s, **kw).explore(config) for s in range(seeds)]


def test_list_steps_one_up_or_down_clipped_at_the_ends() -> None:
    values = [16, 32, 64]
    step: dict[str, Any] = {"resample_probability": 0.0}
    assert {c["bs"] for c in explored({"bs": values}, {"bs": 32}, **step)} == {16, 64}
    assert {c["bs"] for c in explored({"bs": values}, {"bs": 16}, **step)} == {16, 32}
    assert {c["bs"] for c in explored({"bs": values}, {"bs": 64}, **step)} == {32, 64}
    assert {c["bs"] for c in explored({"bs": values}, {"bs": 48}, **step)} <= set(values)


def test_resample_with_probability_one() -> None:
    mutations = {"a": [1, 2, 3], "b": Domain(0.123), "c": lambda: 42}
    for config in explored(mutations, {"a": 2, "b": 9.0, "c": 1}, resample_probability=1.0):
        assert config["a"] in (1, 2, 3) and config["b"] == 0.123 and config["c"] == 42


def test_perturbation_factors_with_a_seeded_rng() -> None:
    for seed in range(10):
        got = pbt(hyperparam_mutations={"lr": Domain(0.5)}, resample_probability=0, seed=seed)
        rng = random.Random(seed)
        rng.random()  # the resample draw comes first
        assert got.explore({"lr": 0.01})["lr"] == 0.01 * rng.choice((1.2, 0.8))
    factors = {c["lr"] for c in explored({"lr": Domain(0.5)}, {"lr": 0.01}, resample_probability=0)}
    assert factors == {0.01 * 1.2, 0.01 * 0.8}


def test_ints_stay_ints_and_bools_stay_bools() -> None:
    results = explored(
        {"n": lambda: 7, "flag": lambda: False}, {"n": 10, "flag": True}, resample_probability=0
    )
    assert {c["n"] for c in results} == {12, 8}
    assert all(type(c["n"]) is int and c["flag"] is True for c in results)


def test_nested_mutations_copy_the_other_keys() -> None:
    mutations = {"opt": {"lr": [0.1, 0.01, 0.001], "wd": Domain(0.2)}}
    donor = {"opt": {"lr": 0.01, "wd": 0.5, "momentum": 0.9}, "layers": 3}
    for config in explored(mutations, donor, resample_probability=0):
        assert config["layers"] == 3 and config["opt"]["momentum"] == 0.9
        assert config["opt"]["lr"] in (0.1, 0.001) and config["opt"]["wd"] in (0.6, 0.4)
    assert donor == {"opt": {"lr": 0.01, "wd": 0.5, "momentum": 0.9}, "layers": 3}


def test_custom_explore_fn_is_applied_last() -> None:
    def custom(config: dict[str, Any]) -> dict[str, Any]:
        return {**config, "seen": config["lr"], "lr": config["lr"] * 100}

    for config in explored(
        {"lr": Domain(0.5)}, {"lr": 0.01}, resample_probability=0, custom_explore_fn=custom
    ):
        assert config["seen"] in (0.01 * 1.2, 0.01 * 0.8) and config["lr"] == config["seen"] * 100
    only = PBT(metric="score", mode="max", custom_explore_fn=lambda c: {**c, "x": 1})
    assert only.explore({"y": 2}) == {"y": 2, "x": 1}
    with pytest.raises(ConfigError, match="custom_explore_fn"):
        PBT(metric="s", mode="max", custom_explore_fn=lambda c: None).explore({})  # type: ignore[arg-type,return-value]


# -- boundaries -----------------------------------------------------------------------


def test_burn_in_and_boundaries_at_multiples() -> None:
    scheduler = pbt(perturbation_interval=2, burn_in_period=5)
    pop = population({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}, it=0)
    assert scheduler.next_decision_at(pop["a"]) == 6  # the first multiple of 2 >= 5
    assert [report(scheduler, pop, "a", it, 1.0) for it in (1, 2, 3, 4, 5)] == [[]] * 5
    assert scheduler.next_decision_at(pop["a"]) == 6
    [decision] = report(scheduler, pop, "a", 6, 1.0)
    assert isinstance(decision, Exploit) and decision.checkpoint == Ckpt("d", 0)
    pop["a"] = replace(pop["a"], iteration=0, last_result=None)  # restored from it
    assert scheduler.next_decision_at(pop["a"]) == 6  # its new line decides 6 again
    assert report(scheduler, pop, "a", 1, 1.0) == []


def test_a_boundary_is_decided_once() -> None:
    scheduler = pbt()
    pop = population({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})
    assert len(report(scheduler, pop, "a", 10, 1.0)) == 1
    assert report(scheduler, pop, "a", 9, 1.0) == []  # restarted from an older checkpoint
    assert report(scheduler, pop, "a", 10, 1.0) == []
    assert len(report(scheduler, pop, "a", 25, 1.0)) == 1  # jumped to boundary 20
    assert scheduler.next_decision_at(pop["a"]) == 30
    assert len(scheduler.lineage) == 2


def test_an_exploit_passes_the_boundaries_up_to_the_donors_checkpoint() -> None:
    scheduler = pbt()
    pop = population({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})
    pop["d"] = replace(pop["d"], iteration=25, checkpoint=Ckpt("d", 25))
    [decision] = report(scheduler, pop, "a", 10, 1.0)
    assert isinstance(decision, Exploit) and decision.checkpoint == Ckpt("d", 25)
    pop["a"] = replace(pop["a"], iteration=25)  # restored from the donor's checkpoint
    assert scheduler.next_decision_at(pop["a"]) == 30
    assert report(scheduler, pop, "a", 26, 0.0) == []  # boundary 20 is behind it
    assert len(report(scheduler, pop, "a", 30, 0.0)) == 1


def test_lineage_entries() -> None:
    scheduler = pbt(seed=3)
    pop = population({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})
    pop["d"] = replace(pop["d"], config={"lr": 0.1, "layers": 5}, checkpoint=Ckpt("d", 8))
    [decision] = report(scheduler, pop, "a", 10, 1.0)
    assert isinstance(decision, Exploit)
    assert scheduler.lineage == [
        {
            "trial_id": "a",
            "time": 10,
            "donor_id": "d",
            "donor_checkpoint_iteration": 8,
            "old_config": {"lr": 0.01, "layers": 3},
            "new_config": decision.config,
        }
    ]
    assert decision.config["layers"] == 5 and decision.config["lr"] in (0.1 * 1.2, 0.1 * 0.8, 0.5)


# -- synch ----------------------------------------------------------------------------


def test_synch_holds_until_all_arrive_then_decides_at_once() -> None:
    scheduler = pbt(synch=True, perturbation_interval=5)
    pop = population({"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0}, it=4)
    for tid, score in (("a", 1.0), ("b", 2.0), ("c", 3.0)):
        assert report(scheduler, pop, tid, 5, score) == [Hold(tid)]  # nobody needs a slot
    assert scheduler.next_decision_at(pop["d"]) == 5
    decisions = report(scheduler, pop, "d", 5, 4.0)
    assert {type(d).__name__: d.trial_id for d in decisions if not isinstance(d, Continue)} == {
        "Exploit": "a"
    }
    assert {d.trial_id for d in decisions if isinstance(d, Continue)} == {"b", "c"}
    [exploit] = [d for d in decisions if isinstance(d, Exploit)]
    assert exploit.donor_id == "d" and exploit.checkpoint == pop["d"].checkpoint
    assert scheduler.next_decision_at(pop["b"]) == 10
    assert report(scheduler, pop, "b", 7, 2.0) == []


def test_synch_on_idle_releases_the_barrier_with_the_trials_present() -> None:
    scheduler = pbt(synch=True, perturbation_interval=5)
    pop = population({"a": 0.0, "b": 0.0, "c": 0.0}, it=3)
    pop["c"] = replace(pop["c"], state="PAUSED")  # paused by the user, short of the barrier
    assert report(scheduler, pop, "a", 5, 1.0) == [Pause("a")]
    assert report(scheduler, pop, "b", 5, 2.0) == [Pause("b")]
    # Two present: one in each quantile. "c" is left alone.
    decisions = {d.trial_id: d for d in scheduler.on_idle(pop)}
    assert set(decisions) == {"a", "b"} and decisions["b"] == Resume("b")
    exploit = decisions["a"]
    assert isinstance(exploit, Exploit) and exploit.donor_id == "b"


def test_synch_an_error_releases_the_barrier() -> None:
    scheduler = pbt(synch=True, perturbation_interval=5)
    pop = population({"a": 0.0, "b": 0.0, "c": 0.0}, it=3)
    report(scheduler, pop, "a", 5, 1.0)
    report(scheduler, pop, "b", 5, 2.0)
    pop["c"] = replace(pop["c"], state="ERROR")
    decisions = scheduler.on_trial_error(pop["c"], pop)
    assert {d.trial_id for d in decisions} == {"a", "b"}


def test_synch_pauses_while_another_trial_waits_for_a_slot_or_is_paused() -> None:
    for state in ("PENDING", "PAUSED"):
        scheduler = pbt(synch=True, perturbation_interval=5)
        pop = population({"a": 0.0, "b": 0.0, "c": 0.0}, it=4)
        pop["c"] = replace(pop["c"], state=state)
        assert report(scheduler, pop, "a", 5, 1.0) == [Pause("a")]


def test_synch_resume_waits_for_the_pause_to_land() -> None:
    scheduler = pbt(synch=True, perturbation_interval=5)
    pop = population({"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0}, it=4)
    pop["d"] = replace(pop["d"], state="PAUSED")  # paused by the user: the others pause
    for tid, score in (("b", 2.0), ("c", 3.0), ("a", 1.0)):
        assert report(scheduler, pop, tid, 5, score) == [Pause(tid)]
    pop["c"] = replace(pop["c"], state="RUNNING")  # its pause has not landed yet
    decisions = report(scheduler, pop, "d", 5, 4.0)
    assert {d.trial_id for d in decisions} == {"a", "b"}
    pop["c"] = replace(pop["c"], state="PAUSED")
    assert scheduler.on_idle(pop) == [Resume("c")]


# -- state and parameters ---------------------------------------------------------------


def _plain(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


@pytest.mark.parametrize("synch", [False, True])
def test_state_round_trip(synch: bool) -> None:
    def stream(seed: int) -> list[tuple[str, int, float]]:
        rng = random.Random(seed)
        return [(f"t{i}", it, rng.random()) for it in range(1, 40) for i in range(6)]

    kwargs: dict[str, Any] = {"seed": 5, "synch": synch, "perturbation_interval": 4}
    original, pop = pbt(**kwargs), population({f"t{i}": 0.0 for i in range(6)}, it=0)
    for entry in stream(1)[:80]:
        report(original, pop, *entry)
    state = pickle.loads(pickle.dumps(original.state_dict()))
    assert _plain(state)  # no checkpoints, only plain data
    copy = pbt(**kwargs)
    copy.load_state_dict(state)
    pop_copy = dict(pop)
    got = [(report(original, pop, *e), report(copy, pop_copy, *e)) for e in stream(1)[80:]]
    assert all(a == b for a, b in got) and any(a for a, _ in got)
    assert original.lineage == copy.lineage and len(original.lineage) > 2
    assert original.state_dict() == copy.state_dict()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"hyperparam_mutations": None},
        {"hyperparam_mutations": {}},
        {"quantile_fraction": 0},
        {"quantile_fraction": 0.6},
        {"perturbation_interval": 0},
        {"perturbation_interval": -2},
        {"resample_probability": 1.5},
        {"resample_probability": -0.1},
        {"burn_in_period": -1},
        {"perturbation_factors": ()},
        {"hyperparam_mutations": {"lr": 5}},
        {"hyperparam_mutations": {"bs": []}},
        {"hyperparam_mutations": {"opt": {"lr": "fast"}}},
        {"mode": "best"},
    ],
)
def test_bad_parameters(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as info:
        pbt(**kwargs)
    named = next(iter(kwargs))
    assert named.split("_")[0] in str(info.value) or "mode" in str(info.value)


# -- keeping an asynchronous population together --------------------------------------


def staggered() -> dict[str, TrialInfo]:
    """Four trials, none with a result yet (their workers are still starting)."""
    return {tid: trial(tid, None, it=0, state="STARTING") for tid in "abcd"}


def test_a_trial_more_than_max_lead_ahead_waits_until_the_laggards_catch_up() -> None:
    scheduler, pop = pbt(), staggered()
    assert report(scheduler, pop, "a", 10, 1.0) == []  # one boundary ahead: allowed
    assert report(scheduler, pop, "a", 20, 1.0) == [Hold("a")]  # two: it waits
    assert scheduler.next_decision_at(pop["a"]) == 30
    assert report(scheduler, pop, "b", 10, 5.0) == []
    assert report(scheduler, pop, "c", 10, 6.0) == []
    assert report(scheduler, pop, "d", 10, 7.0) == [Continue("a")]  # the last one is there
    assert report(scheduler, pop, "a", 21, 1.0) == []


def test_with_max_lead_none_nobody_waits() -> None:
    scheduler, pop = pbt(max_lead=None), staggered()
    assert [report(scheduler, pop, "a", it, 1.0) for it in (10, 20, 30, 40)] == [[]] * 4


def test_a_larger_max_lead_lets_a_trial_run_further_ahead() -> None:
    scheduler, pop = pbt(max_lead=2), staggered()
    assert report(scheduler, pop, "a", 20, 1.0) == []
    assert report(scheduler, pop, "a", 30, 1.0) == [Hold("a")]


@pytest.mark.parametrize("state", ["PAUSED", "TERMINATED", "ERROR"])
def test_paused_and_ended_trials_hold_nobody_back(state: str) -> None:
    scheduler, pop = pbt(), staggered()
    for tid in "bcd":
        pop[tid] = replace(pop[tid], state=state)
    assert report(scheduler, pop, "a", 20, 1.0) == []


def test_a_laggard_that_ends_releases_the_trials_waiting_for_it() -> None:
    scheduler, pop = pbt(), staggered()
    for tid in "bc":
        pop[tid] = replace(pop[tid], state="TERMINATED")
    assert report(scheduler, pop, "a", 20, 1.0) == [Hold("a")]  # d is behind
    pop["d"] = replace(pop["d"], state="ERROR")
    assert scheduler.on_trial_error(pop["d"], pop) == [Continue("a")]


def test_on_idle_releases_the_held_and_stops_waiting_for_laggards_until_they_report() -> None:
    scheduler, pop = pbt(), staggered()
    for tid in "cd":
        pop[tid] = replace(pop[tid], state="TERMINATED")
    assert report(scheduler, pop, "a", 20, 1.0) == [Hold("a")]  # b's worker never starts
    assert scheduler.on_idle(pop) == [Continue("a")]
    assert scheduler.on_idle(pop) == []
    assert report(scheduler, pop, "a", 30, 1.0) == []  # b is not waited for any more
    assert report(scheduler, pop, "b", 1, 0.5) == []  # b reports: it counts again
    assert report(scheduler, pop, "a", 40, 1.0) == [Hold("a")]


def test_held_trials_survive_a_state_round_trip() -> None:
    scheduler, pop = pbt(), staggered()
    for tid in "cd":
        pop[tid] = replace(pop[tid], state="TERMINATED")
    assert report(scheduler, pop, "a", 20, 1.0) == [Hold("a")]
    copy = pbt()
    copy.load_state_dict(pickle.loads(pickle.dumps(scheduler.state_dict())))
    assert report(copy, dict(pop), "b", 10, 5.0) == [Continue("a")]


@pytest.mark.parametrize("max_lead", [-1, 1.5, True, "1"])
def test_bad_max_lead(max_lead: Any) -> None:
    with pytest.raises(ConfigError, match="max_lead"):
        pbt(max_lead=max_lead)


def test_a_trial_without_a_donor_yet_waits_too() -> None:
    scheduler, pop = pbt(), staggered()
    pop["b"] = trial("b", 5.0, it=20, ckpt=None)  # ahead, but nothing persisted yet
    assert report(scheduler, pop, "a", 20, 1.0) == [Hold("a")]  # lower; c and d behind


def test_an_exploit_of_an_older_checkpoint_decides_the_boundaries_after_it_again() -> None:
    scheduler = pbt()
    pop = population({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}, it=30)
    pop["d"] = replace(pop["d"], checkpoint=Ckpt("d", 10))  # its 20 and 30 still uploading
    [decision] = report(scheduler, pop, "a", 30, 1.0)
    assert isinstance(decision, Exploit) and decision.checkpoint == Ckpt("d", 10)
    pop["a"] = replace(pop["a"], iteration=10)  # rolled back to the donor's 10
    assert scheduler.next_decision_at(pop["a"]) == 20  # as Ray Tune: a new line


def test_a_trial_just_exploited_is_no_donor_until_it_saves_on_its_new_line() -> None:
    scheduler = pbt()
    pop = population({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})
    [decision] = report(scheduler, pop, "a", 10, 1.0)
    assert isinstance(decision, Exploit) and decision.donor_id == "d"
    assert report(scheduler, pop, "a", 20, 9.0) == []  # the best now, on d's line...
    assert pop["a"].checkpoint == Ckpt("a", 10)  # ...but its checkpoint is from before
    assert report(scheduler, pop, "b", 20, 0.0) == []  # no donor with a current state
    pop["a"] = replace(pop["a"], checkpoint=Ckpt("a", 20))  # its 20 is persisted
    [decision] = report(scheduler, pop, "b", 21, 0.0)
    assert isinstance(decision, Exploit) and decision.checkpoint == Ckpt("a", 20)


def test_trials_rank_by_their_score_at_their_newest_boundary() -> None:
    """Ray Tune's last_score: a trial's results between boundaries do not move its rank,
    so a trial is not judged against others for being further along."""
    scheduler = pbt()
    pop = population({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})
    for tid, score in (("b", 2.0), ("c", 3.0), ("d", 4.0)):
        assert report(scheduler, pop, tid, 10, score) == []
    for tid in "bcd":  # further along: their newest results all beat a's
        assert report(scheduler, pop, tid, 15, 50.0) == []
    assert report(scheduler, pop, "a", 10, 2.5) == []  # above b's 2.0 at boundary 10
    [decision] = report(scheduler, pop, "b", 20, 0.0)
    assert isinstance(decision, Exploit)  # b's new boundary score is the worst


@dataclass(frozen=True)
class ScoredCkpt:
    trial_id: str
    iteration: int
    metrics: dict[str, Any]


def test_a_clone_ranks_by_the_score_of_the_state_it_took_over() -> None:
    """Ray Tune ranks a clone by its own score from before the exploit until its next
    boundary: a state that no longer exists, which shields the next trial to arrive
    from the bottom of the ranking. Here the clone ranks as what it now is."""
    scheduler = pbt()
    pop = population({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})
    pop["d"] = replace(pop["d"], checkpoint=ScoredCkpt("d", 10, {"score": 3.5}))
    for tid, score in (("c", 3.0), ("d", 4.0)):
        assert report(scheduler, pop, tid, 10, score) == []
    [decision] = report(scheduler, pop, "a", 10, 1.0)
    assert isinstance(decision, Exploit) and decision.donor_id == "d"
    # a now holds d's state at 10 (3.5): b, at 2.0, is the worst of the population.
    [decision] = report(scheduler, pop, "b", 10, 2.0)
    assert isinstance(decision, Exploit) and decision.trial_id == "b"


def test_a_clone_of_a_checkpoint_without_the_metric_ranks_by_the_donors_score() -> None:
    scheduler = pbt()
    pop = population({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})
    for tid, score in (("c", 3.0), ("d", 4.0)):
        assert report(scheduler, pop, tid, 10, score) == []
    [decision] = report(scheduler, pop, "a", 10, 1.0)
    assert isinstance(decision, Exploit) and decision.donor_id == "d"
    [decision] = report(scheduler, pop, "b", 10, 2.0)  # a ranks at d's 4.0 now
    assert isinstance(decision, Exploit) and decision.trial_id == "b"


def test_a_clone_of_a_donor_not_yet_at_a_boundary_ranks_by_the_donors_newest_result() -> None:
    scheduler = pbt()
    pop = population({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})  # none decided at 10 yet
    [decision] = report(scheduler, pop, "a", 10, 1.0)
    assert isinstance(decision, Exploit) and decision.donor_id == "d"
    [decision] = report(scheduler, pop, "b", 10, 2.0)  # a ranks at d's newest 4.0 now
    assert isinstance(decision, Exploit) and decision.trial_id == "b"
