"""What each logger writes, read back with pandas and TensorBoard's own reader."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from tensorboard.plugins.hparams import plugin_data_pb2

from orchestrator.errors import ConfigError
from orchestrator.views.loggers import ExperimentLogger, flatten

from ..support.logger_fakes import (
    FakeCheckpoint,
    FakeTrial,
    accumulator,
    event_files,
    read_jsonl,
    read_progress,
    read_results,
)


async def run_trial(logger: ExperimentLogger, trial: FakeTrial, rows: list[dict]) -> None:
    await logger.on_trial_start(trial)
    for i, row in enumerate(rows, start=1):
        await logger.on_trial_result(trial, trial.report(i, **row))
    await logger.on_trial_complete(trial)


async def test_result_json_and_progress_csv_hold_every_result(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, flush_interval=60)
    trial = FakeTrial("t1")
    rows = [{"loss": 1.0 / i, "eval": {"acc": 0.1 * i}} for i in range(1, 6)]
    rows[3]["late"] = 7  # first appears at iteration 4
    await run_trial(logger, trial, rows)
    await logger.aclose()

    results = read_results(tmp_path / "t1")
    assert list(results["training_iteration"]) == [1, 2, 3, 4, 5]
    assert list(results["trial_id"]) == ["t1"] * 5
    assert results["eval"][0] == {"acc": 0.1}  # result.json keeps the result as given

    progress = read_progress(tmp_path / "t1")
    assert list(progress.columns) == ["loss", "eval/acc", "training_iteration", "trial_id", "late"]
    assert list(progress["training_iteration"]) == [1, 2, 3, 4, 5]
    assert progress["loss"].tolist() == pytest.approx([1.0 / i for i in range(1, 6)])
    assert progress["late"].isna().tolist() == [True, True, True, False, True]
    assert progress["late"][3] == 7


async def test_csv_widens_more_than_once_and_keeps_rows_intact(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, loggers=("csv",), flush_interval=60)
    trial = FakeTrial("t1")
    await logger.on_trial_result(
        trial, trial.report(1, a=1, note='has "quotes", commas\nand a newline')
    )
    await logger.flush()
    await logger.on_trial_result(trial, trial.report(2, a=2, b=20))
    await logger.flush()
    await logger.on_trial_result(trial, trial.report(3, a=3, c={"d": 300}))
    await logger.aclose()

    progress = read_progress(tmp_path / "t1")
    assert list(progress.columns) == ["a", "note", "training_iteration", "trial_id", "b", "c/d"]
    assert progress["a"].tolist() == [1, 2, 3]
    assert progress["note"][0] == 'has "quotes", commas\nand a newline'
    assert progress["b"].isna().tolist() == [True, False, True]
    assert progress["c/d"].isna().tolist() == [True, True, False]


async def test_tensorboard_scalars_are_the_numeric_values_at_their_iterations(
    tmp_path: Path,
) -> None:
    logger = ExperimentLogger(tmp_path, flush_interval=60)
    trial = FakeTrial("t1")
    rows = [
        {"loss": 0.5, "eval": {"acc": 0.9}, "flag": True, "name": "x", "n": np.int64(3)},
        {"loss": math.nan, "eval": {"acc": 0.8}, "flag": False, "name": "y", "n": np.int64(4)},
        {"loss": math.inf, "eval": {"acc": 0.7}, "flag": True, "name": "z", "n": np.int64(5)},
    ]
    await run_trial(logger, trial, rows)
    await logger.aclose()

    acc = accumulator(tmp_path / "t1")
    tags = set(acc.Tags()["scalars"])
    assert tags == {"loss", "eval/acc", "n"}  # no bools, strings, or the step itself
    loss = acc.Scalars("loss")
    assert [e.step for e in loss] == [1, 2, 3]
    assert loss[0].value == 0.5 and math.isnan(loss[1].value) and math.isinf(loss[2].value)
    assert [e.value for e in acc.Scalars("n")] == [3, 4, 5]


async def test_hparams_hold_the_config_and_the_last_results_metrics(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, loggers=("tensorboard",), flush_interval=60)
    config = {"lr": np.float32(0.5), "opt": {"name": "adam", "beta": 0.9}, "layers": [1, 2]}
    config |= {"flag": True, "none": None}
    trial = FakeTrial("t1", config)
    await run_trial(logger, trial, [{"loss": 1.0, "acc": 0.5}, {"loss": 0.5, "acc": 0.75}])
    await logger.aclose()

    content = accumulator(tmp_path / "t1").PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(
        content["_hparams_/session_start_info"]
    ).session_start_info
    assert start.hparams["lr"].number_value == 0.5
    assert start.hparams["opt/name"].string_value == "adam"
    assert start.hparams["opt/beta"].number_value == 0.9
    assert start.hparams["layers"].string_value == "[1, 2]"
    assert start.hparams["flag"].bool_value is True
    assert start.hparams["none"].string_value == "None"
    experiment = plugin_data_pb2.HParamsPluginData.FromString(
        content["_hparams_/experiment"]
    ).experiment
    assert {m.name.tag for m in experiment.metric_infos} == {"loss", "acc"}


async def test_params_follow_config_changes_on_restore_and_on_results(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, loggers=("json",), flush_interval=60)
    trial = FakeTrial("t1", {"lr": 0.1, "odd": object(), "np": np.float64(2.5)})
    odd = trial.config["odd"]
    await logger.on_trial_start(trial)
    for i in range(1, 5):
        await logger.on_trial_result(trial, trial.report(i, loss=1.0))
    # A PBT exploit: restore from a donor's checkpoint at iteration 2 with a new config.
    trial.config = {"lr": 0.2, "odd": odd, "np": np.float64(2.5)}
    trial.rollback(2)
    await logger.on_trial_restore(trial, FakeCheckpoint(iteration=2))
    await logger.on_trial_result(trial, trial.report(3, loss=0.5))
    await logger.flush()
    assert json.loads((tmp_path / "t1" / "params.json").read_text())["lr"] == 0.2
    # A change noticed on the next result only (nobody restored).
    trial.config["lr"] = 0.3
    await logger.on_trial_result(trial, trial.report(4, loss=0.25))
    await logger.aclose()

    params = json.loads((tmp_path / "t1" / "params.json").read_text())
    assert params == {"lr": 0.3, "odd": repr(odd), "np": 2.5}
    history = read_jsonl(tmp_path / "t1" / "params_history.jsonl")
    assert [(h["iteration"], h["config"]["lr"]) for h in history] == [(0, 0.1), (2, 0.2), (3, 0.3)]


async def test_a_subset_of_loggers_writes_only_its_files(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, loggers=("json", "csv"), flush_interval=60)
    await run_trial(logger, FakeTrial("t1"), [{"loss": 1.0}])
    await logger.aclose()
    names = sorted(p.name for p in (tmp_path / "t1").iterdir())
    assert names == ["params.json", "params_history.jsonl", "progress.csv", "result.json"]
    assert event_files(tmp_path / "t1") == []


def test_unknown_logger_names_are_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'wandb'.*'json', 'csv', 'tensorboard'"):
        ExperimentLogger(tmp_path, loggers=("json", "wandb"))
    with pytest.raises(ConfigError, match="flush_interval"):
        ExperimentLogger(tmp_path, flush_interval=0)


def test_flatten_joins_nested_keys_with_a_slash() -> None:
    assert flatten({"a": {"b": {"c": 1}, "d": 2}, "e": {}, "f": 3}) == {
        "a/b/c": 1,
        "a/d": 2,
        "e": {},
        "f": 3,
    }


async def test_trial_ids_cannot_escape_the_log_directory(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path / "logs", loggers=("json",), flush_interval=60)
    trial = FakeTrial("../evil")
    await run_trial(logger, trial, [{"loss": 1.0}])
    await logger.aclose()
    assert [p.name for p in tmp_path.iterdir()] == ["logs"]
    assert read_results(tmp_path / "logs" / ".._evil")["loss"].tolist() == [1.0]


async def test_logs_are_flushed_without_a_disk_sync_per_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logs are a view of results the journal holds: a short trial's files are handed to
    the operating system, never synced (TensorBoard's record writer synced every
    flush and close: two disk syncs or more per trial), and TensorBoard reads them."""
    import os

    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    logger = ExperimentLogger(tmp_path, flush_interval=0.01)
    for name in ("a", "b"):
        await run_trial(logger, FakeTrial(name), [{"loss": 0.5}, {"loss": 0.25}])
        await logger.flush()
    await logger.aclose()
    assert synced == []
    assert [e.value for e in accumulator(tmp_path / "b").Scalars("loss")] == [0.5, 0.25]
