"""A sweep's metric on trials of the fake Ray: one that no result reports is an error at the first
result (whatever drives the sweep), and with ``strict_metrics=False`` a warning and a
searcher told there is nothing to learn; NaN and infinite values are warned about, never
best, and written as standard JSON that reads back as it was. (Moved from
``tests/test_sweep_metrics.py``: only the Ray under them changed.)"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import pytest
from optuna.trial import TrialState as OptunaState

from orchestrator import Trainable, TrialState
from orchestrator.errors import ConfigError
from orchestrator.journal.reader import load as load_journal
from orchestrator.schedulers import ASHA, MedianStopping
from orchestrator.search import OptunaSearch, RandomSearch, grid, uniform
from orchestrator.views.experiments import read_experiment
from storage import open_storage

from ..support.fake_engine import MakeOrchestrator
from ..support.observe import strict_loads
from ..support.trainables import Objective

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
    tmp_path: Path,
    searcher: str,
    scheduler: str | None,
    named: str,
    orchestrator: MakeOrchestrator,
) -> None:
    schedulers = {"asha": ASHA(max_t=5), "median": MedianStopping(metric="los", mode="min")}
    metric = "loss" if scheduler == "median" else "val_los"
    async with orchestrator(storage=tmp_path, name="m") as orch:
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
    tmp_path: Path, caplog: pytest.LogCaptureFixture, orchestrator: MakeOrchestrator
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator")
    searcher = OptunaSearch(seed=0)
    async with orchestrator(storage=tmp_path, name="m", strict_metrics=False) as orch:
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


class Diverging(Trainable):
    """``loss`` by ``config["kind"]``: "fine" 0.5; "nan" 0.1 then NaN; "neg_inf" 0.9 then
    -inf (mode "min": the smallest number, but no real loss)."""

    def setup(self, config: dict[str, Any]) -> None:
        self.n = 0

    def step(self) -> dict[str, Any]:
        self.n += 1
        kind = self.config["kind"]
        if kind == "nan":
            return {"loss": 0.1 if self.n == 1 else math.nan}
        if kind == "neg_inf":
            return {"loss": 0.9 if self.n == 1 else -math.inf, "up": math.inf}
        return {"loss": 0.5}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        Path(checkpoint_dir, "n").write_text(str(self.n))

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        self.n = int(Path(checkpoint_dir, "n").read_text())


async def test_non_finite_metrics_are_warned_never_best_and_standard_json(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, orchestrator: MakeOrchestrator
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator")
    async with orchestrator(storage=tmp_path, name="nf") as orch:
        result = await orch.sweep(
            Diverging,
            {"kind": grid(["nan", "neg_inf", "fine"])},
            metric="loss",
            mode="min",
            max_concurrent_trials=3,
            stop={"training_iteration": 4},
            checkpoint_every=2,
            resources=CPU,
        )
        live_line = orch.progress.render_line()
    by_kind = {t.config["kind"]: t for t in result.trials}
    fine = by_kind["fine"].id
    # One rule: the live table, SweepResult and show agree on the finite best.
    assert result.best_trial.id == fine and result.best_config == {"kind": "fine"}
    assert f"best loss=0.5 ({fine})" in live_line
    said = [r.getMessage() for r in caplog.records if "not a finite number" in r.getMessage()]
    assert sorted(said) == sorted(
        [
            f"trial {by_kind['nan'].id}: result key 'loss' is nan, not a finite number; it "
            "is kept as reported, never counts as the best value, and JSON files (logs, "
            'journal) hold it as the string "NaN"',
            f"trial {by_kind['neg_inf'].id}: result key 'loss' is -inf, not a finite number; "
            "it is kept as reported, never counts as the best value, and JSON files (logs, "
            'journal) hold it as the string "-Infinity"',
            f"trial {by_kind['neg_inf'].id}: result key 'up' is inf, not a finite number; it "
            "is kept as reported, never counts as the best value, and JSON files (logs, "
            'journal) hold it as the string "Infinity"',
        ]
    )
    # Every JSON file of the experiment is standard JSON.
    root = tmp_path / "nf"
    files = [p for p in root.rglob("*") if p.suffix in (".json", ".jsonl") and p.is_file()]
    assert {p.name for p in files} >= {"experiment_state.json", "result.json", "params.json"}
    for path in files:
        text = path.read_text()
        lines = (
            text.splitlines() if path.suffix == ".jsonl" or path.name == "result.json" else [text]
        )
        for line in lines:
            if line.strip():
                strict_loads(line)
    logged = [strict_loads(x) for x in (root / by_kind["nan"].id / "result.json").open()]
    assert [r["loss"] for r in logged] == [0.1, "NaN", "NaN", "NaN"]
    # The journal reads back as reported (a resume sees NaN, not a string), and show agrees.
    async with open_storage(root) as store:
        journaled = {t.id: t for t in await load_journal(store) or []}
        record = await read_experiment(store)
    losses = [r["loss"] for r in journaled[by_kind["nan"].id].results]
    assert losses[0] == 0.1 and all(math.isnan(v) for v in losses[1:])
    assert journaled[by_kind["neg_inf"].id].results[-1]["loss"] == -math.inf
    assert record is not None and record.best("loss", "min") == (fine, 0.5)
