"""PyTorch Lightning's report callback with the real library, in whole experiments on
the fake Ray (one real-Ray run through the facade): each chosen hook is a result with
the chosen metrics, ``save_checkpoints`` decides whether it carries the trainer's
checkpoint, and a trial that fails resumes ``Trainer.fit`` from it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightning")
pytest.importorskip("torch")

from . import experiments  # noqa: E402
from .lightning_model import lightning_train  # noqa: E402


async def run_one(tmp_path: Path, fake_ray: Any, **config: Any) -> Any:
    return await experiments.run_one(
        lightning_train, "lightning", tmp_path, fake_ray, config, max_failures=1
    )


async def test_each_validation_end_is_a_result_with_the_trainers_checkpoint(
    tmp_path: Path, fake_ray: Any
) -> None:
    import torch

    trial = await run_one(tmp_path, fake_ray, epochs=3)
    assert [r["epoch_1"] for r in trial.results] == [1.0, 2.0, 3.0]  # no sanity check
    assert {"val_loss", "val_acc"} <= set(trial.results[0])
    assert "train_loss" not in trial.results[0]  # only the metrics asked for
    assert trial.results[-1]["val_loss"] < trial.results[0]["val_loss"]
    assert [c.iteration for c in trial.checkpoints] == [1, 2, 3]
    last = trial.checkpoints[-1]
    assert last.path is not None
    saved = torch.load(Path(last.path) / "checkpoint", weights_only=False)
    assert saved["epoch"] == 2 and "layer.weight" in saved["state_dict"]


async def test_without_checkpoints_and_on_other_hooks(tmp_path: Path, fake_ray: Any) -> None:
    trial = await run_one(
        tmp_path,
        fake_ray,
        epochs=2,
        save=False,
        on=["train_epoch_end"],
        metrics={"loss": "train_loss", "seen": "epoch_1"},
    )
    assert [sorted(r)[:2] for r in trial.results][:1] == [["loss", "seen"]]
    assert [r["seen"] for r in trial.results] == [1.0, 2.0]
    assert trial.checkpoints == []


async def test_a_failed_trial_resumes_fit_from_its_checkpoint(
    tmp_path: Path, fake_ray: Any
) -> None:
    trial = await run_one(
        tmp_path, fake_ray, epochs=4, fail_at=2, marks=str(tmp_path), filename="trainer.ckpt"
    )
    assert (tmp_path / "failed").exists()
    # Epoch 2 failed right after its report had been taken with its checkpoint: the
    # retry resumed fit from that checkpoint and ran epochs 3-4, none twice.
    assert [r["epoch_1"] for r in trial.results] == [1.0, 2.0, 3.0, 4.0]
    assert [r["resumed_from"] for r in trial.results] == [0.0, 0.0, 2.0, 2.0]
    assert [c.iteration for c in trial.checkpoints] == [1, 2, 3, 4]
    assert all("trainer.ckpt" in os.listdir(str(c.path)) for c in trial.checkpoints)


def test_an_unknown_hook_is_refused_with_the_known_ones() -> None:
    from orchestrator.integrations.lightning import ReportCallback

    with pytest.raises(ValueError, match=r"\['validation_ends'\].*'validation_end'"):
        ReportCallback(on="validation_ends")


def test_the_facades_callbacks_report_and_resume_on_ray(tmp_path: Path, ray_local: Any) -> None:
    from orchestrator.tune.integration.pytorch_lightning import TuneReportCallback

    config = {"facade": True, "epochs": 3, "fail_at": 2, "marks": str(tmp_path)}
    result = experiments.fit_failing_once_on_ray(
        lightning_train, tmp_path, "lightning", "val_loss", config
    )
    history = result.metrics_dataframe
    assert list(history["epoch_1"]) == [1.0, 2.0, 3.0]
    assert list(history["resumed_from"]) == [0.0, 0.0, 2.0]
    assert {"val_loss", "val_acc", "time_since_restore", "done"} <= set(result.metrics)
    assert result.checkpoint is not None
    assert (Path(result.checkpoint.path) / "checkpoint").is_file()
    assert TuneReportCallback(metrics="val_loss")._save_checkpoints is False


async def test_a_stop_ends_fit_at_the_report(tmp_path: Path, fake_ray: Any) -> None:
    trial = await experiments.run_one(
        lightning_train, "stop", tmp_path, fake_ray, {"epochs": 50}, stop={"training_iteration": 2}
    )
    assert [r["epoch_1"] for r in trial.results] == [1.0, 2.0]
