"""Ray Train's names in a facade run: ``ray.train.report``/``get_checkpoint``/
``get_context``/``Checkpoint`` inside a trial reach the facade's, and Ray's configs
(``ray.train.RunConfig``...) given to a ``Tuner`` are taken as the facade's; outside a
facade trial, Ray Train's functions stay Ray Train's."""

from __future__ import annotations

import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

import pytest
import ray.train
import ray.tune
from ray.train import get_checkpoint as rays_get_checkpoint  # bound when the worker imports us

from orchestrator import tune
from orchestrator.tune import train_names
from orchestrator.tune.error import TuneUnsupported

NAMES = ("report", "get_checkpoint", "get_context")


def trial_with_train_names(config: dict[str, Any]) -> None:
    """Fails once after its first checkpoint, then resumes from it: every name used is
    Ray Train's."""
    context = ray.train.get_context()
    start = 0
    checkpoint = rays_get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as directory:
            start = int(Path(directory, "step").read_text())
    for step in range(start + 1, 4):
        with tempfile.TemporaryDirectory() as directory:
            Path(directory, "step").write_text(str(step))
            ray.train.report(
                {"step": step, "trial": context.get_trial_id(), "resumed": start},
                checkpoint=ray.train.Checkpoint.from_directory(directory),
            )
        if step == 1 and not os.path.exists(config["marker"]):
            Path(config["marker"]).touch()
            raise RuntimeError("first attempt")


def test_a_trial_calling_ray_train_names_reports_and_resumes(
    tmp_path: Path, ray_local: Any
) -> None:
    grid = tune.Tuner(
        tune.with_resources(trial_with_train_names, {"cpu": 0.25}),
        param_space={"marker": str(tmp_path / "failed-once")},
        run_config=ray.train.RunConfig(
            storage_path=str(tmp_path),
            name="train-names",
            failure_config=ray.train.FailureConfig(max_failures=1),
            checkpoint_config=ray.train.CheckpointConfig(num_to_keep=2),
        ),
    ).fit()
    result = grid[0]
    assert result.error is None, result.error
    assert result.metrics["step"] == 3 and result.metrics["resumed"] == 1
    assert result.metrics["trial"] == result.metrics["trial_id"]
    assert result.checkpoint is not None
    assert Path(result.checkpoint.path, "step").read_text() == "3"


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in NAMES:  # restored at teardown: the rest of the session sees Ray's own
        monkeypatch.setattr(ray.train, name, getattr(ray.train, name))
    train_names.install()


@pytest.mark.usefixtures("installed")
def test_outside_a_facade_trial_ray_train_names_are_ray_trains(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import contextvars

    from orchestrator.tune import context

    # Other tests run facade trials in this process: this one is outside any trial.
    monkeypatch.setattr(context, "_LATEST", [])
    monkeypatch.setattr(context, "_current", contextvars.ContextVar("outside", default=None))
    assert context.current() is None
    assert all(hasattr(getattr(ray.train, name), "_trialflow_original") for name in NAMES)
    with pytest.raises(RuntimeError, match="outside of a Ray Train training function"):
        ray.train.report({"x": 1})
    assert ray.train.report.__module__ == "ray.train"
    assert pickle.loads(pickle.dumps(ray.train.report)) is ray.train.report
    train_names.install()  # once only: no dispatcher around a dispatcher
    assert not hasattr(ray.train.report._trialflow_original, "_trialflow_original")


def test_rays_configs_become_the_facades_when_built(tmp_path: Path) -> None:
    tuner = tune.Tuner(
        trial_with_train_names,
        run_config=ray.train.RunConfig(
            storage_path=str(tmp_path),
            checkpoint_config=ray.train.CheckpointConfig(
                num_to_keep=2, checkpoint_score_attribute="step"
            ),
            failure_config=ray.train.FailureConfig(max_failures=3),
        ),
    )
    run = tuner._run_config
    assert isinstance(run, tune.RunConfig) and run.storage_path == str(tmp_path)
    assert run.name is None  # Train's own "ray_train_run-<time>" is not the user's
    assert run.checkpoint_config == tune.CheckpointConfig(
        num_to_keep=2, checkpoint_score_attribute="step"
    )
    assert run.failure_config == tune.FailureConfig(max_failures=3)
    mixed = tune.RunConfig(
        name="m", stop={"training_iteration": 2}, failure_config=ray.tune.FailureConfig(1)
    )
    assert mixed.failure_config == tune.FailureConfig(max_failures=1)
    assert tune.Tuner(
        trial_with_train_names, tune_config=ray.tune.TuneConfig(num_samples=3), run_config=mixed
    )._tune_config == tune.TuneConfig(num_samples=3)


def test_a_ray_train_only_setting_is_refused_by_name() -> None:
    with pytest.raises(TuneUnsupported, match=r"RunConfig\(worker_runtime_env=\.\.\.\)"):
        tune.Tuner(
            trial_with_train_names,
            run_config=ray.train.RunConfig(worker_runtime_env={"env_vars": {"A": "1"}}),
        )
    with pytest.raises(ValueError, match=r"RunConfig\(failure_config=\.\.\.\)"):
        tune.RunConfig(failure_config={"max_failures": 1})
