"""Behaviours Ray Tune's own tests check (test_function_api, test_result_grid,
test_sample, test_tuner), in our words, without Ray: what a function trainable's return
or yield becomes, errors that keep the user's exception class, ``sample_from``'s two
signatures, a one-trial run's best result, and config errors raised at construction."""

from __future__ import annotations

import datetime
import pathlib
import pickle
import random
from collections.abc import Callable
from typing import Any

import pytest

from orchestrator import tune
from orchestrator.actor.function import FunctionTrainable, wrap_function
from orchestrator.core.wire import FUNCTION_DONE
from orchestrator.errors import ConfigError, like_cause
from orchestrator.search import SearchSpace
from orchestrator.tune import ResultGrid, TuneError, report, sample_from, uniform
from orchestrator.tune.adapters import engine_trainable
from orchestrator.tune.context import RunInfo
from orchestrator.tune.result import DEFAULT_METRIC

from ..support.tune_fakes import FakeTrial, _State

INFO = RunInfo("exp", "/tmp/exp", "train")
TUNE_KEYS = {"done", "timestamp", "date", "time_since_restore", "iterations_since_restore", "pid"}
HOST_KEYS = {"hostname", "node_ip"}


def results_of(fn: Callable[..., Any], config: dict[str, Any] | None = None) -> list[Any]:
    """Every step of ``fn`` run as the facade's function trainable, up to its end; Tune's
    automatic keys dropped (they are checked once, below)."""
    trainable = wrap_function(engine_trainable(fn, INFO, {}))()
    assert isinstance(trainable, FunctionTrainable)
    trainable.config, trainable.trial_id, trainable.iteration = dict(config or {}), "t_1", 0
    out: list[Any] = []
    try:
        while True:
            result = trainable.step()
            if FUNCTION_DONE in result:
                return out
            out.append({k: v for k, v in result.items() if k not in TUNE_KEYS | HOST_KEYS})
            assert TUNE_KEYS <= set(result)
            if len(out) > 10:
                raise AssertionError(f"{fn.__name__} did not end: {out}")
    finally:
        trainable.cleanup()


# -- a function trainable's return ---------------------------------------------------------


def returns_a_dict(config: dict[str, Any]) -> dict[str, Any]:
    return {"score": config["a"] * 2}


def reports_then_returns(config: dict[str, Any]) -> dict[str, Any]:
    report({"step": 1})
    return {"score": 5}


def returns_a_number(config: dict[str, Any]) -> float:
    return 1.5


def returns_nothing_after_a_report(config: dict[str, Any]) -> None:
    report({"step": 1})


def returns_zero(config: dict[str, Any]) -> int:
    return 0


def yields(config: dict[str, Any]) -> Any:
    yield {"step": 1}
    yield 7
    yield None


def returns_a_string(config: dict[str, Any]) -> str:
    return "done"


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (returns_a_dict, [{"score": 8}]),
        (reports_then_returns, [{"step": 1}, {"score": 5}]),
        (returns_a_number, [{DEFAULT_METRIC: 1.5}]),
        (returns_nothing_after_a_report, [{"step": 1}]),
        (returns_zero, []),  # a false value is nothing, as on Tune
        (yields, [{"step": 1}, {DEFAULT_METRIC: 7}]),
    ],
)
def test_a_functions_return_or_yield_is_reported_by_tunes_rule(
    fn: Callable[..., Any], expected: list[Any]
) -> None:
    assert results_of(fn, {"a": 4}) == expected


def test_a_return_that_is_neither_a_dict_nor_a_number_fails_in_tunes_words() -> None:
    with pytest.raises(ValueError, match="Invalid return or yield value. Either return/yield"):
        results_of(returns_a_string)


# -- errors keep the user's exception class --------------------------------------------------


class DataError(ValueError):
    pass


def test_a_trials_error_is_an_instance_of_what_the_trainable_raised() -> None:
    raised = DataError("bad shard 3")
    raised.shard = 3  # type: ignore[attr-defined]
    failed = FakeTrial("b", [1.0], _State("ERROR"), raised)
    grid = ResultGrid([FakeTrial("a", [2.0]), failed], "/tmp/exp", "loss", "min")
    error = grid.errors[0]
    assert isinstance(error, DataError) and isinstance(error, ValueError)
    assert isinstance(error, TuneError) and grid[1].error is error
    assert str(error) == "trial b failed: bad shard 3" and error.__cause__ is raised
    assert error.shard == 3  # type: ignore[attr-defined]
    with pytest.raises(DataError, match="trial b failed"):
        raise error
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, DataError) and str(copy) == str(error)


def test_an_error_of_a_plain_kind_is_a_plain_tune_error() -> None:
    assert type(like_cause(TuneError, "m", Exception("x"))) is TuneError
    own = TuneError("already ours")
    assert type(like_cause(TuneError, "m", own)) is TuneError
    # Built-in kinds with their own layout work too.
    missing = like_cause(TuneError, "m", FileNotFoundError(2, "gone", "/data"))
    assert isinstance(missing, OSError) and (missing.errno, missing.filename) == (2, "/data")
    assert str(missing) == "m"
    assert isinstance(like_cause(TuneError, "m", KeyError("k")), KeyError)


# -- sample_from ---------------------------------------------------------------------------


def test_sample_from_reads_the_config_by_either_of_tunes_signatures() -> None:
    space = SearchSpace(
        {
            "a": uniform(1, 2),
            "by_key": sample_from(lambda spec: spec["a"] * 10),
            "by_attr": sample_from(lambda spec: spec.a * 10),
            "old_key": sample_from(lambda spec: spec["config"]["a"] * 10),
            "old_attr": sample_from(lambda spec: spec.config.a * 10),
            "nested": {"b": 3},
            "nested_attr": sample_from(lambda spec: spec.nested.b + spec.config["nested"]["b"]),
            "none": sample_from(lambda: 42),
        }
    )
    config = space.sample(random.Random(0))
    a = config["a"]
    assert config["by_key"] == config["by_attr"] == config["old_key"] == config["old_attr"]
    assert config["by_key"] == a * 10 and config["nested_attr"] == 6 and config["none"] == 42


def test_a_config_key_named_config_wins_as_on_tune() -> None:
    space = SearchSpace({"config": 5, "x": sample_from(lambda spec: spec["config"])})
    assert space.sample(random.Random(0))["x"] == 5


# -- best result -----------------------------------------------------------------------------


def test_a_one_trial_run_has_it_as_its_best_without_a_metric() -> None:
    grid = ResultGrid([FakeTrial("only", [3.0])], "/tmp/exp", None, None)
    assert grid.get_best_result().config == {"id": "only"}
    assert grid.get_best_result("never_reported", "max").config == {"id": "only"}
    two = ResultGrid([FakeTrial("a", [3.0]), FakeTrial("b", [1.0])], "/tmp/exp", None, None)
    with pytest.raises(ValueError, match="No metric is provided"):
        two.get_best_result()


# -- config errors at construction -------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (
            lambda: tune.TuneConfig(mode="maxx"),
            r"TuneConfig\(mode=...\): must be one of \['min', 'max'\], got 'maxx'",
        ),
        (
            lambda: tune.TuneConfig(metric=3),
            r"TuneConfig\(metric=...\): must be a reported metric's name, got 3",
        ),
        (
            lambda: tune.TuneConfig(num_samples=0),
            r"TuneConfig\(num_samples=...\): must be an int >= 1, or -1 \(until stopped\), got 0",
        ),
        (lambda: tune.TuneConfig(num_samples="4"), r"TuneConfig\(num_samples=...\)"),
        (
            lambda: tune.TuneConfig(max_concurrent_trials=-1),
            "`max_concurrent_trials` must be greater or equal than 1, got -1",
        ),
        (
            lambda: tune.TuneConfig(time_budget_s=-5),
            r"TuneConfig\(time_budget_s=...\): must be seconds > 0",
        ),
        (lambda: tune.TuneConfig(reuse_actors="yes"), r"TuneConfig\(reuse_actors=...\)"),
        (
            lambda: tune.TuneConfig(trial_name_creator="name"),
            r"TuneConfig\(trial_name_creator=...\)",
        ),
        (lambda: tune.RunConfig(name=""), r"RunConfig\(name=...\): must be a non-empty str"),
        (lambda: tune.RunConfig(storage_path=3), r"RunConfig\(storage_path=...\)"),
        (lambda: tune.RunConfig(verbose=-1), r"RunConfig\(verbose=...\)"),
        (lambda: tune.RunConfig(callbacks="cb"), r"RunConfig\(callbacks=...\)"),
        (
            lambda: tune.CheckpointConfig(num_to_keep=0),
            "Received invalid num_to_keep: 0. Must be None or an integer >= 1.",
        ),
        (
            lambda: tune.CheckpointConfig(checkpoint_score_order="up"),
            'checkpoint_score_order must be either "max" or "min"',
        ),
        (
            lambda: tune.CheckpointConfig(checkpoint_frequency=-1),
            "checkpoint_frequency must be >=0, got -1",
        ),
        (
            lambda: tune.FailureConfig(fail_fast="yes"),
            r"fail_fast must be one of \{bool, 'raise'\}. Got 'yes'.",
        ),
        (lambda: tune.FailureConfig(max_failures=-2), r"FailureConfig\(max_failures=...\)"),
        (
            lambda: tune.FailureConfig(max_failures=1, fail_fast="raise"),
            "max_failures must be 0 if fail_fast='raise'.",
        ),
        (
            lambda: tune.Tuner(returns_a_dict, param_space=[1]),
            "The `param_space` passed to the `Tuner` must be a dict. Got 'list' instead.",
        ),
    ],
)
def test_a_wrong_config_is_refused_when_built_in_one_line(
    make: Callable[[], Any], words: str
) -> None:
    with pytest.raises(ConfigError, match=words) as caught:
        make()
    assert "\n" not in str(caught.value) and caught.value.__cause__ is None
    assert isinstance(caught.value, ValueError)  # what Tune raises


def test_sample_until_stopped_is_taken_other_negatives_refused() -> None:
    assert tune.TuneConfig(num_samples=-1, time_budget_s=10).num_samples == -1
    with pytest.raises(ConfigError, match=r"num_samples.*-1 \(until stopped\)"):
        tune.TuneConfig(num_samples=-2)


def test_right_configs_are_taken_as_tune_takes_them() -> None:
    assert tune.FailureConfig(fail_fast="RAISE").fail_fast == "raise"
    assert tune.TuneConfig(max_concurrent_trials=0, time_budget_s=datetime.timedelta(seconds=3))
    assert tune.RunConfig(storage_path=pathlib.Path("/tmp/x")).storage_path == "/tmp/x"
    assert tune.RunConfig(verbose=2, callbacks=[]).verbose == 2


# -- tune.run's analysis ---------------------------------------------------------------------


def analysis(metric: str | None = "loss", mode: str | None = "min") -> tune.ExperimentAnalysis:
    trials = [FakeTrial("a", [5.0, 1.0, 4.0]), FakeTrial("b", [3.0]), FakeTrial("c", [2.0])]
    return tune.ExperimentAnalysis.of(ResultGrid(trials, "/tmp/exp", metric, mode), "train")


def test_the_analysis_picks_the_best_as_the_result_grid_does() -> None:
    found = analysis()
    assert found.best_config == {"id": "c"} and found.best_trial is found.trials[2]
    assert found.best_result["loss"] == 2.0 and found.best_result["config"] == {"id": "c"}
    assert found.get_best_config("loss", "max") == {"id": "a"}
    assert found.get_best_trial("loss", "min", scope="all") is found.trials[0]
    assert found.get_best_trial("acc", "max") is None  # Tune: a warning, no error
    assert str(found.trials[0]) == "train_a" and found.trials[1].status == "TERMINATED"
    assert set(found.results) == {"a", "b", "c"}


def test_the_analysis_says_what_is_missing_in_tunes_words() -> None:
    found = analysis(None, None)
    with pytest.raises(ValueError, match=r"To fetch the `best_config`, pass a `metric`"):
        found.best_config  # noqa: B018
    with pytest.raises(ValueError, match=r"No `metric` has been passed"):
        found.get_best_trial()
    with pytest.raises(ValueError, match=r"If set, `mode` has to be one of \[min, max\]"):
        found.dataframe("loss", "up")
    with pytest.raises(ValueError, match="you'll also have to pass a `metric`"):
        found.dataframe(mode="min")


def test_the_analysis_dataframes() -> None:
    pytest.importorskip("pandas")
    found = analysis()
    assert sorted(found.dataframe("loss", "min")["loss"]) == [1.0, 2.0, 3.0]  # best ever
    assert sorted(found.dataframe()["loss"]) == [2.0, 3.0, 4.0]  # last
    assert found.results_df.index.name == "trial_id" and len(found.results_df) == 3
    assert list(found.trial_dataframes["a"]["loss"]) == [5.0, 1.0, 4.0]


def test_the_result_keys_are_tunes() -> None:
    ray_result = pytest.importorskip("ray.tune.result")
    from orchestrator.tune import result

    for name in result.__all__:
        assert getattr(result, name) == getattr(ray_result, name), name


def test_the_last_checkpoint_without_a_trial_is_the_longest_trials_newest() -> None:
    from types import SimpleNamespace

    trials = [FakeTrial("a", [5.0, 1.0, 4.0]), FakeTrial("b", [3.0])]
    trials[0].latest_checkpoint = SimpleNamespace(path="/tmp/exp/a/checkpoint_000003", uri="")
    found = tune.ExperimentAnalysis.of(ResultGrid(trials, "/tmp/exp", None, None), "train")
    last = found.get_last_checkpoint()  # no metric set: Tune's training_iteration, max
    assert last is not None and last.path == "/tmp/exp/a/checkpoint_000003"
    assert found.get_last_checkpoint(found.trials[1]) is None
    assert found.get_last_checkpoint(metric="loss", mode="min") is None  # b: none
    assert found.get_last_checkpoint(metric="loss", mode="max") is not None
