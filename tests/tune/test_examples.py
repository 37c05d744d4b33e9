"""Ray Tune's own examples, rewritten only in their import lines, run on the facade
(on the session's Ray, in this process: the ones that do not call ray.init themselves)
and print their answer. The benchmark runs all twelve, each in a fresh process."""

from __future__ import annotations

import contextlib
import io
import runpy
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.tune_examples import examples_dir, rewrite, run_example

from ..support.trackers import read_mlflow

pytestmark = pytest.mark.usefixtures("ray_local")

#: The quickest framework-free examples that leave ray.init to Tune (a class trainable
#: with a callback, a function with checkpoints, a logger callback with name creators).
IN_PROCESS = {
    "custom_checkpointing_with_callback": "Best checkpoint: Checkpoint(filesystem=local, path=",
    "custom_func_checkpointing": "Best checkpoint:  Checkpoint(filesystem=local, path=",
    "logging_example": "Best hyperparameters:  {'steps': 100, 'width': ",
}


#: Examples that train with a framework's report callback (``orchestrator.tune.integration``),
#: with what they print; they take no --smoke-test and run whole (10 and 4 trials).
WITH_FRAMEWORK = {
    "xgboost_example": ("xgboost", "Best model total accuracy: 0."),
    "lightgbm_example": ("lightgbm", "Best hyperparameters found were:  {'objective': 'binary'"),
}


@pytest.mark.parametrize("name", sorted(WITH_FRAMEWORK))
def test_a_framework_example_runs_after_only_the_import_rewrite(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    framework, expected = WITH_FRAMEWORK[name]
    pytest.importorskip(framework)
    pytest.importorskip("sklearn")
    source = (examples_dir() / f"{name}.py").read_text()
    assert f"from ray.tune.integration.{framework} import TuneReportCheckpointCallback" in source
    script = tmp_path / f"{name}.py"
    script.write_text(rewrite(source))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(sys, "argv", [str(script), "--smoke-test"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(script), run_name="__main__")
    assert expected in out.getvalue(), out.getvalue()[-2000:]
    checkpoints = list((tmp_path / "ray_results").glob("*/*/checkpoint_*"))
    assert checkpoints and all(any(p.iterdir()) for p in checkpoints)  # the boosters


@pytest.mark.parametrize("name", sorted(IN_PROCESS))
def test_a_tune_example_runs_after_only_the_import_rewrite(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / f"{name}.py"
    script.write_text(rewrite((examples_dir() / f"{name}.py").read_text()))
    monkeypatch.setenv("HOME", str(tmp_path))  # its ~/ray_results
    monkeypatch.setattr(sys, "argv", [str(script), "--smoke-test"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(script), run_name="__main__")
    printed = out.getvalue()
    assert IN_PROCESS[name] in printed, printed[-2000:]
    assert (tmp_path / "ray_results").is_dir()
    if name == "logging_example":
        assert printed.count("TestLogger for trial easy_objective_") == 5  # its name creator
        links = [
            p for p in (tmp_path / "ray_results" / "hyperband_test").iterdir() if p.is_symlink()
        ]
        assert len(links) == 5 and all(p.name.endswith("_123") for p in links)


def test_the_mlflow_example_runs_after_only_the_import_rewrite(
    tmp_path: Path, ray_local: Any
) -> None:
    """In a fresh process on the session's Ray (its smoke test's MLflow store is the
    run's: TMPDIR), read back: the callback's runs (with the trial's files, from
    ``save_artifact=True``) and ``setup_mlflow``'s, five trials each."""
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    workdir = tmp_path / "run"
    done = run_example(
        "mlflow_example", "ours", workdir, timeout=300, extra_env={"RAY_ADDRESS": ray_local.address}
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "failed for trial" not in done.stderr, done.stderr[-3000:]  # no tracker call failed
    store = str(workdir / "mlruns")
    callback = read_mlflow(store, "example")
    assert len(callback) == 5
    for run in callback.values():
        assert run.status == "FINISHED" and {"width", "height", "steps"} <= set(run.params)
        assert run.steps("mean_loss") == [1, 2, 3, 4, 5]  # one step per result
        artifacts = {a.path for a in MlflowClient(store).list_artifacts(run.run_id)}
        assert "result.json" in artifacts, artifacts
    inside = read_mlflow(store, "mixin_example")  # one run per trial (by its trial_id tag)
    assert len(inside) == 5
    for run in inside.values():
        assert run.status == "FINISHED"  # ended with its function, not with its process
        assert run.steps("mean_loss") == [0, 1, 2, 3, 4]  # the function's own steps
        assert {"width", "height"} <= set(run.params)
