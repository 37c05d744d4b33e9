"""NaN and infinite metrics, without Ray: one warning per trial and key, one rule for
"best" (the progress table, SweepResult, ``show``/``ls``, plots), and JSON files that
strict, standard parsers accept."""

from __future__ import annotations

import io
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

import orchestrator.core.json_codec as codec
from orchestrator.api.sweep_result import SweepResult
from orchestrator.cli.present import TrialRow, trials_table
from orchestrator.core.results import ResultWarnings, clean_result
from orchestrator.views.experiments import StoredTrial, _best
from orchestrator.views.loggers import ExperimentLogger
from orchestrator.views.plotting import _best as plot_best
from orchestrator.views.progress import ProgressReporter

from ..support.logger_fakes import FakeTrial
from ..support.observe import strict_loads


def test_a_non_finite_value_is_kept_and_warned_about_once_per_trial_and_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator")
    warnings = ResultWarnings()
    rows = [
        ("a", {"loss": math.nan}),
        ("a", {"loss": math.inf, "eval": {"acc": -math.inf}}),
        ("a", {"loss": 1.0, "eval": {"acc": math.nan}, "per_class": [0.5, math.nan]}),
        ("a", {"np": np.float32("nan"), "loss": -math.inf}),
        ("b", {"loss": math.nan}),
    ]
    cleaned = []
    for trial_id, row in rows:
        clean_result(row, warnings.for_trial(trial_id))
        cleaned.append(row)
    said = [r.getMessage() for r in caplog.records if "not a finite number" in r.getMessage()]
    assert len(said) == 5, said  # a: loss, eval.acc, per_class, np; b: loss
    assert said[0].startswith("trial a: result key 'loss' is nan") and '"NaN"' in said[0]
    assert "'eval.acc' is -inf" in said[1] and '"-Infinity"' in said[1]
    assert math.isnan(cleaned[0]["loss"]) and cleaned[1]["loss"] == math.inf  # as reported
    assert type(cleaned[3]["np"]) is float and math.isnan(cleaned[3]["np"])


def test_the_journal_writes_standard_json_that_reads_back_as_it_was() -> None:
    value = {
        "loss": math.nan,
        "up": math.inf,
        "down": [-math.inf, {"deep": math.nan}],
        "said": "NaN",  # a string the trainable reported stays a string
        "np": np.float64("inf"),
        "fine": 0.5,
    }
    text = codec.dumps(value)
    strict_loads(text)
    back = codec.loads(text)
    assert math.isnan(back["loss"]) and back["up"] == math.inf
    assert back["down"][0] == -math.inf and math.isnan(back["down"][1]["deep"])
    assert back["said"] == "NaN" and back["np"] == math.inf and back["fine"] == 0.5
    assert math.isnan(codec.loads(text.encode())["loss"])
    assert codec.loads('{"loss": NaN}')["loss"] != 0  # journals of earlier versions still load
    assert codec.dumps({"fine": 0.5}) == '{"fine":0.5}'  # the common case is untouched


async def test_the_json_logs_are_standard_json(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, loggers=("json", "csv"), flush_interval=60)
    trial = FakeTrial("t1", {"lr": math.nan, "wd": 0.1})
    await logger.on_trial_start(trial)
    rows = [{"loss": 1.0}, {"loss": math.nan, "eval": {"acc": math.inf}}, {"loss": -math.inf}]
    for i, row in enumerate(rows, start=1):
        await logger.on_trial_result(trial, trial.report(i, **row))
    await logger.on_trial_complete(trial)
    await logger.aclose()
    folder = tmp_path / "t1"
    lines = [strict_loads(x) for x in (folder / "result.json").read_text().splitlines()]
    assert [r["loss"] for r in lines] == [1.0, "NaN", "-Infinity"]
    assert lines[1]["eval"]["acc"] == "Infinity"
    assert strict_loads((folder / "params.json").read_text()) == {"lr": "NaN", "wd": 0.1}
    history = [strict_loads(x) for x in (folder / "params_history.jsonl").read_text().splitlines()]
    assert history == [{"iteration": 0, "config": {"lr": "NaN", "wd": 0.1}}]
    assert float(lines[1]["eval"]["acc"]) == math.inf  # float() reads the spelling back


# -- one "best" ----------------------------------------------------------------------

#: Mode "min" on "loss". "diverged" was best until its NaN; "neg_inf" reports -inf (the
#: smallest number, but no real value); "fine" stands by 0.5 from its newest result
#: reporting the loss; "tie" equals it but comes later; "worse" is finite and worse.
HISTORIES: dict[str, list[dict[str, Any]]] = {
    "diverged": [{"loss": 0.1}, {"loss": math.nan}],
    "neg_inf": [{"loss": 0.9}, {"loss": -math.inf}],
    "fine": [{"loss": 0.6}, {"loss": 0.5}, {"other": 1}],
    "tie": [{"loss": 0.5}],
    "worse": [{"loss": 0.7}],
}


def numbered(trial_id: str) -> list[dict[str, Any]]:
    return [
        {**r, "training_iteration": i, "trial_id": trial_id}
        for i, r in enumerate(HISTORIES[trial_id], start=1)
    ]


class HandleLike:
    """What SweepResult and the final table read of a Trial."""

    def __init__(self, trial_id: str) -> None:
        self.id = trial_id
        self.config = {"name": trial_id}
        self.results = numbered(trial_id)
        self.last_result = self.results[-1]
        self.state = "TERMINATED"


async def test_best_is_one_rule_for_the_table_the_sweep_result_show_and_plots() -> None:
    handles = [HandleLike(t) for t in HISTORIES]

    reporter = ProgressReporter("loss", "min", console=Console(file=io.StringIO()), live=False)
    for handle in handles:
        for result in handle.results:
            await reporter.on_trial_result(handle, result)
    table_line = reporter.render_line()
    await reporter.aclose()

    assert "best loss=0.5 (fine)" in table_line
    swept = SweepResult(handles, "loss", "min")  # type: ignore[arg-type]
    assert swept.best_trial.id == "fine" and swept.best_config == {"name": "fine"}
    records = [
        StoredTrial(h.id, "x", h.config, "TERMINATED", len(h.results), 0, None, [], h.results, [])
        for h in handles
    ]
    rows = [
        TrialRow(r.id, r.config, r.state, r.iteration, 0, r.last_result, results=r.results)
        for r in records
    ]
    shown = io.StringIO()
    Console(file=shown, width=300).print(trials_table(rows, "loss", "min", title="show"))
    order = [line.split()[1] for line in shown.getvalue().splitlines() if line[:2] == "│ "]
    series = {h.id: ({"results": h.results}, []) for h in handles}

    assert _best(records, "loss", "min") == ("fine", 0.5)
    assert order[:2] == ["fine", "tie"] and set(order[-2:]) == {"diverged", "neg_inf"}
    assert plot_best(series, "loss", "min") == ("fine", 0.5)
    # Over every result, the diverged trial's 0.1 stands (a finite value it reported).
    assert swept.get_best(scope="all").id == "diverged"


def test_without_a_finite_value_nobody_is_best() -> None:
    handles = [HandleLike("diverged"), HandleLike("neg_inf")]
    handles[0].results = handles[0].results[1:]
    swept = SweepResult(handles, "loss", "min")  # type: ignore[arg-type]
    with pytest.raises(Exception, match="no trial has a finite value of the metric 'loss'"):
        swept.get_best()


def test_retention_by_score_keeps_finite_bests_not_infinities() -> None:
    from orchestrator.core.checkpoints import Checkpoint, RetentionPolicy

    def ckpt(iteration: int, acc: float) -> Checkpoint:
        key = f"t/checkpoint_{iteration:06d}"
        return Checkpoint("t", iteration, key, "file:///x/" + key, metrics={"acc": acc})

    kept = [ckpt(1, 0.9), ckpt(2, math.inf), ckpt(3, math.nan), ckpt(4, 0.2)]
    policy = RetentionPolicy(keep=2, score=("acc", "max"))
    doomed = {c.iteration for c in policy.plan_deletions(kept)}
    assert doomed == {2, 3}  # kept: the best finite (1) and the newest (4)
