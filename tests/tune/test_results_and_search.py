"""ResultGrid picks the best by Tune's scopes and gives a multi-objective run's Pareto
front; Tune searchers of one's own, ConcurrencyLimiter and Repeater drive the engine's
searcher protocol as Tune drives them. Plain data, no Ray."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.errors import ConfigError
from orchestrator.search import SearchSpace
from orchestrator.tune import ResultGrid, uniform
from orchestrator.tune.search import ConcurrencyLimiter, Repeater, Searcher
from orchestrator.tune.search.searcher import engine_searcher

from ..support.tune_fakes import FakeTrial, _State


def grid() -> ResultGrid:
    trials = [
        FakeTrial("a", [5.0, 1.0, 4.0]),  # best of all, worst last
        FakeTrial("b", [3.0, 3.0, 3.0]),  # best mean
        FakeTrial("c", [9.0, 9.0, 2.0, 2.5]),  # best last
        FakeTrial("d", [], _State("ERROR"), RuntimeError("boom")),
    ]
    return ResultGrid(trials, "/tmp/exp", "loss", "min")


def test_the_best_result_follows_tunes_scopes() -> None:
    results = grid()
    assert results.get_best_result().config["id"] == "c"
    assert results.get_best_result(scope="all").config["id"] == "a"
    assert results.get_best_result(scope="avg").config["id"] == "b"
    assert results.get_best_result(scope="last-5-avg").config["id"] == "b"
    assert results.get_best_result("loss", "max").config["id"] == "a"
    with pytest.raises(RuntimeError, match="No best trial found for the given metric: acc"):
        results.get_best_result("acc", "max")
    assert len(results) == 4 and results.num_errors == 1 and results.num_terminated == 3
    assert "boom" in str(results.errors[0]) and results[0].path == "/tmp/exp/a"
    assert results[2].metrics["loss"] == 2.5 and results[2].metrics["config"] == {"id": "c"}


def test_the_dataframe_has_a_row_per_trial_with_its_config() -> None:
    pytest.importorskip("pandas")
    frame = grid().get_dataframe(filter_metric="loss", filter_mode="min")
    assert list(frame["config/id"]) == ["a", "b", "c", "d"]
    assert list(frame["loss"][:3]) == [1.0, 3.0, 2.0]


def test_the_pareto_front_of_a_multi_objective_run() -> None:
    trials = [FakeTrial("a", [1.0]), FakeTrial("b", [2.0])]
    results = ResultGrid(trials, "/tmp/exp", None, None, (["loss", "gain"], ["min", "min"]))
    assert [r.config["id"] for r in results.get_pareto_front()] == ["a", "b"]
    assert [r.config["id"] for r in results.get_pareto_front(["loss"], ["min"])] == ["a"]


class Listed(Searcher):
    """A Tune searcher of one's own: a list of partial configs, then FINISHED."""

    def __init__(self) -> None:
        super().__init__(metric="loss", mode="min")
        self.todo = [{"x": 0.1}, {"x": 0.2}, {"x": 0.3}]
        self.told: list[tuple[str, Any, bool]] = []

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        return self.todo.pop(0) if self.todo else Searcher.FINISHED

    def on_trial_complete(self, trial_id: str, result: Any = None, error: bool = False) -> None:
        self.told.append((trial_id, result, error))


def set_up(searcher: Any, raw: dict[str, Any]) -> Any:
    engine = engine_searcher(searcher, raw)
    engine.setup(SearchSpace(raw), metric="loss", mode="min", num_samples=10, seed=0)
    return engine


def test_a_tune_searcher_of_ones_own_is_merged_into_the_space_and_finishes() -> None:
    listed = Listed()
    engine = set_up(listed, {"x": 0.0, "const": 7})
    configs = [engine.suggest(f"t{n}") for n in range(4)]
    assert configs == [{"x": 0.1, "const": 7}, {"x": 0.2, "const": 7}, {"x": 0.3, "const": 7}, None]
    engine.on_trial_complete("t0", {"loss": 1.0}, error=False)
    assert listed.told == [("t0", {"loss": 1.0}, False)]
    with pytest.raises(ConfigError, match="already instantiated with a search space"):
        set_up(Listed(), {"x": uniform(0, 1)})


def test_concurrency_limiter_batches_and_repeater_averages() -> None:
    limited = ConcurrencyLimiter(Listed(), max_concurrent=2, batch=True)
    limited.bind({"x": 0.0})
    limited.setup(SearchSpace({"x": 0.0}), metric="loss", mode="min", num_samples=9, seed=0)
    assert limited.suggest("a") and limited.suggest("b") and limited.suggest("c") is None
    limited.on_trial_complete("a", {"loss": 1.0})
    assert limited.suggest("c") is None  # the batch is not over yet
    limited.on_trial_complete("b", {"loss": 1.0})
    assert limited.suggest("c") == {"x": 0.3}

    listed = Listed()
    repeated = Repeater(listed, repeat=2)
    repeated.bind({"x": 0.0})
    repeated.setup(SearchSpace({"x": 0.0}), metric="loss", mode="min", num_samples=9, seed=0)
    first, second = repeated.suggest("a"), repeated.suggest("b")
    assert first == {"x": 0.1, "__trial_index__": 0} and second == {"x": 0.1, "__trial_index__": 1}
    repeated.on_trial_complete("a", {"loss": 1.0})
    assert listed.told == []
    repeated.on_trial_complete("b", {"loss": 3.0})
    assert listed.told == [("a", {"loss": 2.0}, False)]


def test_a_restored_run_reads_its_results_from_the_journal_records() -> None:
    from orchestrator.tune.records import RecordedTrial
    from orchestrator.views.experiments import StoredTrial

    record = StoredTrial(
        id="abc_00000",
        trainable="(pickled)",
        config={"x": 1},
        state="TERMINATED",
        iteration=2,
        num_failures=0,
        error=None,
        checkpoints=[
            {
                "iteration": 2,
                "uri": "file:///r/abc_00000/checkpoint_000002",
                "key": "abc_00000/checkpoint_000002",
                "metrics": {"loss": 0.5},
            }
        ],
        results=[{"loss": 1.0, "training_iteration": 1}, {"loss": 0.5, "training_iteration": 2}],
        events=[],
    )
    results = ResultGrid([RecordedTrial(record, "/r")], "/r", "loss", "min")
    best = results.get_best_result()
    assert best.metrics["loss"] == 0.5 and best.config == {"x": 1}
    assert best.checkpoint is not None and best.checkpoint.path == "/r/abc_00000/checkpoint_000002"
    assert results.num_terminated == 1
