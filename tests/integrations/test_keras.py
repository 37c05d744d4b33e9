"""Keras' report callback with the real library (Keras 3 on its PyTorch backend), in
whole experiments on the fake Ray (one real-Ray run through the facade): each epoch is a
result, ``checkpoint_on``/``report_metrics_on`` decide which carry the saved model, and a
trial that fails resumes ``fit`` from it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
pytest.importorskip("torch")
pytest.importorskip("keras")

from . import experiments  # noqa: E402
from .keras_model import keras_train  # noqa: E402


async def run_one(tmp_path: Path, fake_ray: Any, **config: Any) -> Any:
    return await experiments.run_one(
        keras_train, "keras", tmp_path, fake_ray, config, max_failures=1
    )


async def test_each_epoch_is_a_result_with_the_model(tmp_path: Path, fake_ray: Any) -> None:
    from orchestrator.integrations.keras import ReportCallback

    trial = await run_one(tmp_path, fake_ray, epochs=3)
    assert [r["epoch_1"] for r in trial.results] == [1, 2, 3]
    assert {"loss", "accuracy", "val_loss", "val_accuracy"} <= set(trial.results[0])
    assert trial.results[-1]["loss"] < trial.results[0]["loss"]
    assert [c.iteration for c in trial.checkpoints] == [1, 2, 3]
    last = trial.checkpoints[-1]
    assert last.path is not None
    model = ReportCallback.get_model(last.path)
    assert int(model.optimizer.iterations.numpy()) == 3 * 4  # three epochs of 4 steps


async def test_metrics_and_hooks_choose_what_is_reported(tmp_path: Path, fake_ray: Any) -> None:
    trial = await run_one(
        tmp_path,
        fake_ray,
        epochs=2,
        checkpoint_on=["train_end"],
        report_on="epoch_end",
        metrics={"loss": "val_loss"},
    )
    # Two epochs reported without a model, then the end of training with it.
    assert [[k for k in r if "loss" in k] for r in trial.results] == [["loss"]] * 3
    assert trial.results[2]["loss"] == trial.results[1]["loss"]  # the last epoch's logs
    assert [c.iteration for c in trial.checkpoints] == [3]


async def test_a_failed_trial_resumes_fit_from_its_model(tmp_path: Path, fake_ray: Any) -> None:
    trial = await run_one(tmp_path, fake_ray, epochs=4, fail_at=2, marks=str(tmp_path))
    assert (tmp_path / "failed").exists()
    # Epoch 2 failed right after its report was taken with its model: the retry
    # resumed fit from it and ran epochs 3-4, none twice.
    assert [r["epoch_1"] for r in trial.results] == [1, 2, 3, 4]
    assert [r["resumed_from"] for r in trial.results] == [0, 0, 2, 2]


def test_an_unknown_hook_is_refused_with_the_known_ones() -> None:
    from orchestrator.integrations.keras import ReportCallback

    with pytest.raises(ValueError, match=r"checkpoint_on=\['epochs_end'\].*'epoch_end'"):
        ReportCallback(checkpoint_on="epochs_end")


def test_the_facades_callback_reports_and_resumes_on_ray(tmp_path: Path, ray_local: Any) -> None:
    from orchestrator import tune
    from orchestrator.tune.integration.keras import (
        TuneReportCallback,
        TuneReportCheckpointCallback,
    )

    config = {"facade": True, "epochs": 3, "fail_at": 2, "marks": str(tmp_path)}
    result = experiments.fit_failing_once_on_ray(keras_train, tmp_path, "keras", "val_loss", config)
    history = result.metrics_dataframe
    assert list(history["epoch_1"]) == [1, 2, 3]
    assert list(history["resumed_from"]) == [0, 0, 2]
    assert {"val_loss", "accuracy", "time_since_restore", "done"} <= set(result.metrics)
    assert result.checkpoint is not None
    model = TuneReportCheckpointCallback.get_model(result.checkpoint)
    assert int(model.optimizer.iterations.numpy()) == 3 * 4
    with pytest.raises(tune.TuneUnsupported, match="TuneReportCheckpointCallback"):
        TuneReportCallback()


async def test_a_stop_ends_fit_at_the_report(tmp_path: Path, fake_ray: Any) -> None:
    trial = await experiments.run_one(
        keras_train, "stop", tmp_path, fake_ray, {"epochs": 50}, stop={"training_iteration": 2}
    )
    assert [r["epoch_1"] for r in trial.results] == [1, 2]
