"""``OptunaSearch`` as Tune's ``Searcher`` on its own, without a Tuner: converting a
space, being given one, suggesting, learning, adding evaluated points, saving and
restoring (the behaviours of Ray Tune's searcher tests, in our words)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("optuna")

from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from orchestrator import tune
from orchestrator.tune.search.optuna import OptunaSearch

SPACE = {"a": tune.uniform(0, 1), "b": {"c": tune.choice(["x", "y"])}, "n": tune.randint(1, 5)}


def test_convert_search_space_names_nested_keys_and_keeps_bounds() -> None:
    converted = OptunaSearch.convert_search_space({**SPACE, "constant": 3})
    assert converted == {
        "a": FloatDistribution(0.0, 1.0),
        "b/c": CategoricalDistribution(["x", "y"]),
        "n": IntDistribution(1, 4),  # randint's upper bound is excluded
    }
    assert OptunaSearch.convert_search_space({"constant": 3}) == {}
    with pytest.raises(ValueError, match="Grid search parameters cannot"):
        OptunaSearch.convert_search_space({"g": tune.grid_search([1, 2])})


def test_suggest_and_complete_without_a_tuner() -> None:
    searcher = OptunaSearch(SPACE, metric="score", mode="max", seed=3)
    first = searcher.suggest("t1")
    assert first is not None and 0 <= first["a"] <= 1 and first["b"]["c"] in ("x", "y")
    assert searcher.suggest("t1") == first  # the same trial asked again: the same config
    searcher.on_trial_result("t1", {"score": 0.5, "training_iteration": 1})
    searcher.on_trial_complete("t1", {"score": 1.0, "training_iteration": 2})
    assert searcher.study.best_value == 1.0
    searcher.suggest("t2")
    searcher.on_trial_complete("t2")  # no result: nothing learnt, no error
    assert len(searcher.study.trials) == 2


def test_set_search_properties_gives_a_space_to_a_searcher_without_one() -> None:
    searcher = OptunaSearch(metric="loss", mode="min")
    assert searcher.set_search_properties(None, None, SPACE)
    config = searcher.suggest("t1")
    assert config is not None and set(config) == {"a", "b", "n"}
    own = OptunaSearch(SPACE, metric="loss", mode="min")
    assert not own.set_search_properties("loss", "min", {"z": tune.uniform(0, 1)})


def test_a_searcher_missing_its_space_or_objective_says_what_to_pass() -> None:
    with pytest.raises(RuntimeError, match="no search space has been defined"):
        OptunaSearch(metric="m", mode="max").suggest("t1")
    with pytest.raises(RuntimeError, match=r"`metric` \(None\) or `mode` \(None\)"):
        OptunaSearch(SPACE).suggest("t1")


def test_evaluated_points_are_told_to_the_study() -> None:
    searcher = OptunaSearch(SPACE, metric="score", mode="max")
    searcher.add_evaluated_point({"a": 0.25, "b": {"c": "y"}, "n": 2}, 7.0)
    searcher.add_evaluated_point({"a": 0.5, "b": {"c": "x"}, "n": 1}, None, error=True)
    searcher.add_evaluated_point(
        {"a": 0.75, "b": {"c": "x"}, "n": 3}, 2.0, pruned=True, intermediate_values=[1.0, 2.0]
    )
    states = [trial.state.name for trial in searcher.study.trials]
    assert states == ["COMPLETE", "FAIL", "PRUNED"]
    assert searcher.study.best_trial.params == {"a": 0.25, "b/c": "y", "n": 2}
    with pytest.raises(Exception, match="'z' is not a searched key"):
        searcher.add_evaluated_point({"z": 1}, 1.0)

    def by_run(trial: object) -> None:
        return None

    with pytest.raises(TypeError, match="Define-by-run function"):
        OptunaSearch(by_run, metric="m", mode="max").add_evaluated_point({"a": 1}, 1.0)


def test_save_and_restore_go_on_with_the_same_study(tmp_path: Path) -> None:
    searcher = OptunaSearch(SPACE, metric="score", mode="max", seed=5)
    for index in range(3):
        searcher.suggest(f"t{index}")
        searcher.on_trial_complete(f"t{index}", {"score": float(index)})
    running = searcher.suggest("t3")
    path = str(tmp_path / "searcher.pkl")
    searcher.save(path)
    restored = OptunaSearch()
    restored.restore(path)
    assert [t.value for t in restored.study.trials[:3]] == [0.0, 1.0, 2.0]
    assert restored.suggest("t3") == running  # the trial in flight is still known
    restored.on_trial_complete("t3", {"score": 9.0})
    assert restored.study.best_value == 9.0
    assert restored.suggest("t4") == searcher.suggest("t4")  # same sampler state


def test_a_converted_space_searches_as_the_same_space_written_for_optuna() -> None:
    from optuna.samplers import RandomSampler

    from orchestrator.tune.search.sample import Categorical, Float, Integer

    space = {
        "a": Categorical([2, 3, 4]).uniform(),
        "b": {"x": Integer(0, 5).quantized(2), "y": 4, "z": Float(1e-4, 1e-2).loguniform()},
    }
    by_hand = {
        "a": CategoricalDistribution([2, 3, 4]),
        "b/x": IntDistribution(0, 4, step=2),
        "b/z": FloatDistribution(1e-4, 1e-2, log=True),
    }
    converted = OptunaSearch.convert_search_space(space)
    assert converted == by_hand
    first = OptunaSearch(converted, metric="a", mode="max", sampler=RandomSampler(seed=1234))
    second = OptunaSearch(by_hand, metric="a", mode="max", sampler=RandomSampler(seed=1234))
    config = first.suggest("0")
    assert config == second.suggest("0")
    assert config is not None and config["a"] in (2, 3, 4) and config["b"]["x"] in (0, 2, 4)
    assert 1e-4 <= config["b"]["z"] <= 1e-2


def test_results_after_completion_are_ignored_and_points_given_at_construction_count() -> None:
    from optuna.samplers import RandomSampler

    space = {"report": tune.uniform(0.0, 5.0), "list": [1, 2, 3], "num": 4}
    searcher = OptunaSearch(
        OptunaSearch.convert_search_space(space),
        metric="metric",
        mode="max",
        sampler=RandomSampler(seed=1234),
    )
    searcher.suggest("trial_1")
    searcher.on_trial_result("trial_1", {"training_iteration": 1, "metric": 1})
    searcher.on_trial_complete("trial_1", {"training_iteration": 2, "metric": 1})
    searcher.on_trial_result("trial_1", {"training_iteration": 3, "metric": 1})  # too late
    searcher.on_trial_complete("trial_1", {"training_iteration": 4, "metric": 1})  # again
    assert len(searcher.study.trials) == 1
    warm = OptunaSearch(
        {"report": tune.uniform(0.0, 5.0)},
        metric="metric",
        mode="max",
        points_to_evaluate=[{"report": 1.0}],
        evaluated_rewards=[1.0],
    )
    assert len(warm.study.trials) == 1  # the study exists before any suggest


class _Ran:
    def __init__(self, report: float, last: dict[str, object], status: str) -> None:
        self.config = {"report": report, "num": 4}
        self.last_result = last
        self.status = status


def test_trials_run_elsewhere_are_told_to_the_study() -> None:
    searcher = OptunaSearch({"report": tune.uniform(0.0, 5.0)}, metric="metric", mode="max")
    ran = [
        _Ran(1.0, {"metric": 1.0, "done": True}, "TERMINATED"),
        _Ran(2.0, {"metric": 0.5}, "TERMINATED"),  # stopped early: pruned
        _Ran(3.0, {"metric": 0.1}, "ERROR"),
        _Ran(4.0, {"other": 1}, "TERMINATED"),  # no metric: left out
    ]
    searcher.add_evaluated_trials(ran, "metric")
    searcher.add_evaluated_trials(ran[0], "metric")
    states = [trial.state.name for trial in searcher.study.trials]
    assert states == ["COMPLETE", "PRUNED", "FAIL", "COMPLETE"]
    assert searcher.suggest("next") is not None


def _loss(config: dict[str, float]) -> None:
    tune.report({"loss": (config["x"] - 0.3) ** 2})


@pytest.mark.usefixtures("ray_local")
def test_a_searcher_saved_after_a_run_goes_on_in_the_next_run(tmp_path: Path) -> None:
    """Set up by a Tuner's param_space, saved, restored into a new OptunaSearch: the next
    Tuner (no param_space: Tune refuses one with a searcher that has its space) searches
    the same space and its study holds both runs' trials."""
    first = OptunaSearch(metric="loss", mode="min", seed=0)
    tune.Tuner(
        _loss,
        param_space={"x": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(num_samples=2, search_alg=first),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="one", verbose=0),
    ).fit()
    first.save(str(tmp_path / "searcher.pkl"))
    again = OptunaSearch()
    again.restore(str(tmp_path / "searcher.pkl"))
    results = tune.Tuner(
        _loss,
        tune_config=tune.TuneConfig(num_samples=2, search_alg=again),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="two", verbose=0),
    ).fit()
    assert len(results) == 2 and all(0 <= r.config["x"] <= 1 for r in results)
    assert len(again.study.trials) == 4
