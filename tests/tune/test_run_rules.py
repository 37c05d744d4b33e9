"""Run-wide rules of the facade on Ray: a time budget and a stop_all stopper end the
run (its trials stopped, no new one started); fail_fast ends it at the first error, no
other trial reporting after it ("raise": fit raises it); with_parameters puts its
objects in Ray's store once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray

from orchestrator import tune
from orchestrator.tune.adapters import unwrap
from orchestrator.tune.stopper import Stopper

pytestmark = pytest.mark.usefixtures("ray_local")

CPU = {"cpu": 0.25}


def slow(config: dict[str, Any]) -> None:
    for step in range(10_000):
        time.sleep(0.05)
        tune.report({"step": step, "loss": 1.0 / (step + 1)})


def fails(config: dict[str, Any]) -> None:
    tune.report({"step": 0})
    if config["x"] == 1:
        raise ValueError("trial one fails")
    for step in range(1, 10_000):
        time.sleep(0.05)
        tune.report({"step": step})


def run(tmp_path: Path, trainable: Any, name: str, **config: Any) -> tune.ResultGrid:
    run_config = config.pop("run_config", {})
    return tune.Tuner(
        tune.with_resources(trainable, CPU),
        param_space={"x": tune.grid_search([0, 1, 2, 3])},
        tune_config=tune.TuneConfig(max_concurrent_trials=2, **config),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name=name, verbose=0, **run_config),
    ).fit()


def test_a_time_budget_and_a_stop_all_stopper_end_the_run(tmp_path: Path) -> None:
    started = time.monotonic()
    budget = run(tmp_path, slow, "budget", time_budget_s=4)
    assert time.monotonic() - started < 60
    assert 1 <= len(budget) < 4 and budget.num_terminated == len(budget)

    class FiveResults(Stopper):
        def __init__(self) -> None:
            self.seen = 0

        def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
            self.seen += 1
            return False

        def stop_all(self) -> bool:
            return self.seen >= 5

    stopped = run(tmp_path, slow, "stop_all", run_config={"stop": FiveResults()})
    steps = [r.metrics.get("step", -1) for r in stopped]
    assert len(stopped) == 2 and sum(s + 1 for s in steps) <= 7, steps  # 5, give or take


def fails_once_the_others_run(config: dict[str, Any]) -> None:
    """x=1 fails once the others run; they report only after the driver handled that
    failure (the callback's mark): Tune's docs example, with no timing in it."""
    marks = Path(config["marks"])

    def wait_for(*names: str) -> None:
        for _ in range(1200):
            if all((marks / name).exists() for name in names):
                return
            time.sleep(0.05)

    if config["x"] == 1:
        wait_for("running-0", "running-2")
        raise ValueError("trial one fails")
    (marks / f"running-{config['x']}").touch()
    wait_for("failed")
    for step in range(10_000):
        tune.report({"step": step})
        time.sleep(0.05)


class MarksErrors(tune.Callback):
    def __init__(self, marks: Path) -> None:
        self.marks = marks

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        (self.marks / "failed").touch()


def test_fail_fast_ends_the_run_at_the_first_error(tmp_path: Path) -> None:
    """No other trial reports after the first error (Tune stops them all at once)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    results = tune.Tuner(
        tune.with_resources(fails_once_the_others_run, CPU),
        param_space={"x": tune.grid_search([0, 1, 2]), "marks": str(marks)},
        tune_config=tune.TuneConfig(max_concurrent_trials=3),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path),
            name="ff",
            verbose=0,
            callbacks=[MarksErrors(marks)],
            failure_config=tune.FailureConfig(fail_fast=True),
        ),
    ).fit()
    assert results.num_errors == 1 and results.num_terminated == 2
    assert [r.metrics for r in results if r.error is None] == [{}, {}]
    assert isinstance(results.errors[0], ValueError)
    with pytest.raises(ValueError, match="trial one fails") as raised:
        run(
            tmp_path,
            fails,
            "ffr",
            run_config={"failure_config": tune.FailureConfig(fail_fast="raise")},
        )
    assert isinstance(raised.value, tune.TuneError)


def test_with_parameters_puts_each_object_in_rays_store_once() -> None:
    data = np.arange(1_000_000)
    wrapped = tune.with_parameters(slow, data=data)
    _, first, _ = unwrap(wrapped)
    _, again, _ = unwrap(wrapped)
    assert isinstance(first["data"], ray.ObjectRef) and first == again
    assert (ray.get(first["data"]) == data).all()


class Steps(tune.Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.n = 0

    def step(self) -> dict[str, Any]:
        time.sleep(0.02)
        self.n += 1
        return {"n": self.n, "done": self.n >= 40}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"n": self.n}

    def load_checkpoint(self, checkpoint: Any) -> None:
        self.n = checkpoint["n"]


class CheckpointAtFive(tune.Callback):
    def on_trial_result(
        self, iteration: int, trials: Any, trial: Any, result: Any, **info: Any
    ) -> None:
        if result["n"] == 5:
            result[tune.result.SHOULD_CHECKPOINT] = True


def test_a_callback_asks_for_a_checkpoint_with_should_checkpoint(tmp_path: Path) -> None:
    results = tune.Tuner(
        tune.with_resources(Steps, CPU),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="cb", verbose=0, callbacks=[CheckpointAtFive()]
        ),
    ).fit()
    saved = [metrics["training_iteration"] for _, metrics in results[0].best_checkpoints]
    assert len(saved) == 1 and 5 < saved[0] < 40  # after the step in flight at iteration 5


def scores(config: dict[str, Any]) -> dict[str, Any]:
    return {"score": config["b"]}


def test_a_returned_dict_and_an_indexed_sample_from_reach_the_results(tmp_path: Path) -> None:
    """The two gaps a first script hits (Tune's docs tune.py): a function's return is its
    last result, and sample_from's spec indexes the config."""
    results = tune.Tuner(
        tune.with_resources(scores, CPU),
        param_space={"a": tune.grid_search([1, 2]), "b": tune.sample_from(lambda s: s["a"] * 10)},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="ret", verbose=0),
    ).fit()
    assert sorted(r.metrics["score"] for r in results) == [10, 20]
    assert results.get_best_result().config == {"a": 2, "b": 20}
    assert all(r.metrics["training_iteration"] == 1 for r in results)


def twice(config: dict[str, Any]) -> None:
    for step in range(2):
        tune.report({"score": config["a"] * (step + 1)})


def test_the_legacy_tune_run_returns_an_analysis(tmp_path: Path) -> None:
    """tune.run with its common arguments (Tune's deprecated checkpoint ones and
    local_dir included), and raise_on_failed_trial, as on Tune."""
    found = tune.run(
        twice,
        config={"a": tune.grid_search([1, 2])},
        metric="score",
        mode="max",
        resources_per_trial=CPU,
        local_dir=str(tmp_path),
        name="legacy",
        verbose=0,
        stop={"training_iteration": 2},
        keep_checkpoints_num=1,
        checkpoint_score_attr="min-score",
    )
    assert found.best_config == {"a": 2} and found.best_result["score"] == 4
    assert found.get_best_trial("score", "min").config == {"a": 1}  # type: ignore[union-attr]
    assert [t.status for t in found.trials] == ["TERMINATED", "TERMINATED"]
    assert found.experiment_path == f"{tmp_path}/legacy" and len(found.dataframe()) == 2
    with pytest.raises(tune.TuneError, match=r"Trials did not complete: \[fails_"):
        tune.run(fails, config={"x": 1}, storage_path=str(tmp_path), verbose=0)
    kept = tune.run(
        fails, config={"x": 1}, storage_path=str(tmp_path), verbose=0, raise_on_failed_trial=False
    )
    assert [t.status for t in kept.trials] == ["ERROR"]
