"""A sweep's metric on real trials: one that no result reports is an error at the first
result (whatever drives the sweep), and with ``strict_metrics=False`` a warning and a
searcher told there is nothing to learn."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from optuna.trial import TrialState as OptunaState

from orchestrator import Orchestrator, TrialState
from orchestrator.errors import ConfigError
from orchestrator.schedulers import ASHA, MedianStopping
from orchestrator.search import OptunaSearch, RandomSearch, uniform

from .trainables import Objective

pytestmark = pytest.mark.usefixtures("ray_local")

CPU = {"cpu": 0.25}


def space(marks: Path) -> dict[str, Any]:
    return {"x": uniform(-1, 1), "y": uniform(-1, 1), "marks": str(marks)}


@pytest.mark.parametrize(
    ("searcher", "scheduler", "named"),
    [
        ("optuna", None, "the sweep's metric 'val_los'"),
        ("random", "asha", "the sweep's metric 'val_los'"),
        ("random", "median", "its scheduler's (MedianStopping) metric 'los'"),
    ],
)
async def test_a_metric_the_first_result_lacks_is_an_error_naming_it(
    tmp_path: Path, searcher: str, scheduler: str | None, named: str
) -> None:
    schedulers = {"asha": ASHA(max_t=5), "median": MedianStopping(metric="los", mode="min")}
    metric = "loss" if scheduler == "median" else "val_los"
    async with Orchestrator(storage=tmp_path, name="m") as orch:
        result = await orch.sweep(
            Objective,
            space(tmp_path),
            num_samples=2,
            metric=metric,
            mode="min",
            searcher=OptunaSearch(seed=0) if searcher == "optuna" else RandomSearch(seed=0),
            scheduler=schedulers.get(scheduler or ""),
            max_concurrent_trials=2,
            stop={"training_iteration": 5},
            resources=CPU,
        )
    for trial in result.trials:
        assert trial.state is TrialState.ERROR and len(trial.results) == 1
        message = str(trial.error)
        assert message.startswith(f"trial {trial.id}: its first result does not report {named}")
        assert "'loss'" in message and "strict_metrics=False" in message
        assert "stop criterion" not in message


async def test_without_strict_metrics_a_trial_that_never_reports_it_warns_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator")
    searcher = OptunaSearch(seed=0)
    async with Orchestrator(storage=tmp_path, name="m", strict_metrics=False) as orch:
        result = await orch.sweep(
            Objective,
            space(tmp_path),
            num_samples=2,
            metric="val_los",
            mode="min",
            searcher=searcher,
            max_concurrent_trials=2,
            stop={"training_iteration": 3},
            resources=CPU,
        )
    assert all(t.state is TrialState.TERMINATED and t.iteration == 3 for t in result.trials)
    warnings = [r.getMessage() for r in caplog.records if "without reporting" in r.getMessage()]
    assert sorted(w.split(" trial ")[1].split()[0] for w in warnings) == sorted(
        t.id for t in result.trials
    )
    assert all("'val_los'" in w and "'loss'" in w for w in warnings)
    # Optuna is told they failed (nothing learnt), not a value from a result without it.
    assert [t.state for t in searcher.study.trials] == [OptunaState.FAIL] * 2
    with pytest.raises(ConfigError, match="no trial reported the metric 'val_los'"):
        result.get_best()
