"""OptunaSearch's own space, objective and warm start (Ray Tune's OptunaSearch arguments):
a define-by-run function, Optuna distributions, several objectives, points to try first
and points already evaluated."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.errors import ConfigError
from orchestrator.search import OptunaSearch, SearchSpace, uniform

optuna = pytest.importorskip("optuna")


def define_by_run(trial: Any) -> dict[str, Any]:
    kind = trial.suggest_categorical("kind", ["a", "b"])
    trial.suggest_float("net/width", 0.0, 1.0)
    if kind == "a":
        trial.suggest_int("depth", 1, 3)
    return {"steps": 5}


def test_a_define_by_run_space_gives_nested_configs_with_its_constants() -> None:
    searcher = OptunaSearch(space=define_by_run, metric="loss", mode="min", seed=0)
    searcher.setup(SearchSpace({"fixed": 1}), metric=None, mode=None, num_samples=8, seed=None)
    for n in range(8):
        config = searcher.suggest(f"t{n}")
        assert config is not None
        assert config["fixed"] == 1 and config["steps"] == 5
        assert 0.0 <= config["net"]["width"] <= 1.0
        assert ("depth" in config) == (config["kind"] == "a")
        searcher.on_trial_complete(f"t{n}", {"loss": config["net"]["width"]})
    assert len(searcher.study.trials) == 8


def test_its_own_space_refuses_domains_in_the_sweeps_space() -> None:
    searcher = OptunaSearch(space=define_by_run, metric="loss", mode="min")
    with pytest.raises(ConfigError, match="space key 'x'.*its own space"):
        searcher.setup(
            SearchSpace({"x": uniform(0, 1)}), metric=None, mode=None, num_samples=1, seed=None
        )


def test_several_objectives_make_a_multi_objective_study() -> None:
    searcher = OptunaSearch(metric=["loss", "gain"], mode=["min", "max"], seed=0)
    searcher.setup(
        SearchSpace({"x": uniform(0, 1)}), metric=None, mode=None, num_samples=10, seed=None
    )
    for n in range(10):
        config = searcher.suggest(f"t{n}")
        assert config is not None
        searcher.on_trial_result(f"t{n}", {"loss": 1.0, "training_iteration": 1})
        searcher.on_trial_complete(f"t{n}", {"loss": config["x"], "gain": config["x"] ** 2})
    study = searcher.study
    assert len(study.directions) == 2
    assert {t.state for t in study.trials} == {optuna.trial.TrialState.COMPLETE}
    assert study.best_trials  # the Pareto front


def test_the_sweeps_objective_wins_over_the_searchers_own() -> None:
    searcher = OptunaSearch(metric="other", mode="max", seed=0)
    searcher.setup(
        SearchSpace({"x": uniform(0, 1)}), metric="loss", mode="min", num_samples=2, seed=None
    )
    assert searcher.study.direction == optuna.study.StudyDirection.MINIMIZE


def test_points_to_evaluate_come_first_and_rewards_record_them_as_done() -> None:
    points = [{"x": 0.25, "n": {"y": 0.5}}, {"x": 0.75, "n": {"y": 0.125}}]
    space = SearchSpace({"x": uniform(0, 1), "n": {"y": uniform(0, 1)}})
    tried = OptunaSearch(points_to_evaluate=points, seed=0)
    tried.setup(space, metric="loss", mode="min", num_samples=3, seed=None)
    assert [tried.suggest(f"t{n}") for n in range(2)] == points

    known = OptunaSearch(points_to_evaluate=points, evaluated_rewards=[1.0, 2.0], seed=0)
    known.setup(space, metric="loss", mode="min", num_samples=3, seed=None)
    assert [t.value for t in known.study.trials] == [1.0, 2.0]
    assert known.study.best_params == {"x": 0.25, "n/y": 0.5}


def test_bad_warm_starts_are_refused_at_once() -> None:
    with pytest.raises(ConfigError, match="2 evaluated_rewards for 1 points"):
        OptunaSearch(points_to_evaluate=[{"x": 1}], evaluated_rewards=[1, 2])
    searcher = OptunaSearch(points_to_evaluate=[{"z": 1}])
    with pytest.raises(ConfigError, match="names 'z', which is not a searched key"):
        searcher.setup(
            SearchSpace({"x": uniform(0, 1)}), metric="m", mode="min", num_samples=1, seed=None
        )
    with pytest.raises(ConfigError, match="2 metrics but 1 modes"):
        OptunaSearch(metric=["a", "b"], mode="min")
