"""What ``Tuner.restore`` refuses before it continues a run, as Tune does: another
trainable, a ``param_space`` with other keys; ``can_restore`` takes a ``pathlib.Path``;
and a directory Ray Tune wrote is named as Tune's, with what to do, not continued."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from orchestrator import tune
from orchestrator.errors import ConfigError
from orchestrator.tune.error import TuneError

ROOT = Path(__file__).resolve().parents[2]


def small(config: dict[str, Any]) -> None:
    tune.report({"score": config["x"]})


def other(config: dict[str, Any]) -> None:
    tune.report({"score": 0})


def test_restore_refuses_another_trainable_or_other_param_space_keys(
    tmp_path: Path, ray_local: Any
) -> None:
    tune.Tuner(
        tune.with_resources(small, {"cpu": 0.25}),
        param_space={"x": 1, "opt": {"lr": tune.uniform(0, 1)}},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="run", verbose=0),
    ).fit()
    path = tmp_path / "run"
    assert tune.Tuner.can_restore(path)  # a pathlib.Path, as on Tune
    assert not tune.Tuner.can_restore(tmp_path / "missing")
    assert not tune.Tuner.can_restore(tmp_path) and not tune.Tuner.can_restore(path / "other")
    pyarrow_fs = pytest.importorskip("pyarrow.fs")
    assert tune.Tuner.can_restore(path, storage_filesystem=pyarrow_fs.LocalFileSystem())
    with pytest.raises(ConfigError, match="identifier 'other' but the run's is 'small'"):
        tune.Tuner.restore(path, other)
    with pytest.raises(ValueError, match=r"added: \['y'\], missing: \['opt/lr'\]"):
        tune.Tuner.restore(path, small, param_space={"x": 1, "y": 2})
    for other_keys in ({}, {"x": 1, "opt": {}}, {"x": 1, "opt": {"lr": 0.1, "e": 3}}):
        with pytest.raises(ValueError, match="keys differ from the run's"):
            tune.Tuner.restore(path, small, param_space=other_keys)
    same_keys = {"x": 5, "opt": {"lr": tune.uniform(0, 0.5)}}  # values may be refreshed
    restored = tune.Tuner.restore(
        path, tune.with_resources(small, {"cpu": 0.25}), param_space=same_keys
    )
    assert len(restored.get_results()) == 1


RAY_TUNE_DRIVER = textwrap.dedent(
    """
    import ray
    from ray import tune
    ray.init(address={address!r}, logging_level="ERROR")
    def one_step(config):
        tune.report({{"score": config["x"]}})
    tune.Tuner(
        tune.with_resources(one_step, {{"cpu": 0.25}}),
        param_space={{"x": 1}},
        run_config=tune.RunConfig(storage_path={storage!r}, name="by_ray_tune", verbose=0),
    ).fit()
    """
)


def test_a_run_ray_tune_wrote_is_named_as_tunes_not_continued(
    tmp_path: Path, ray_cluster: Any, caplog: pytest.LogCaptureFixture
) -> None:
    script = RAY_TUNE_DRIVER.format(address=ray_cluster.address, storage=str(tmp_path))
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300, cwd=str(tmp_path))
    path = tmp_path / "by_ray_tune"
    assert (path / "tuner.pkl").exists()  # Ray Tune wrote it
    assert_refused_as_ray_tunes(path, caplog)


def assert_refused_as_ray_tunes(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="orchestrator.tune"):
        assert not tune.Tuner.can_restore(path)
    assert "written by Ray Tune" in caplog.text
    with pytest.raises(TuneError) as caught:
        tune.Tuner.restore(str(path), small)
    message = str(caught.value)
    assert "\n" not in message and caught.value.__cause__ is None
    assert f"{path} was written by Ray Tune" in message
    assert "start a new run with tune.Tuner(...)" in message and "Ray Tune's own" in message


@pytest.mark.parametrize("files", [["tuner.pkl"], ["experiment_state-2026-01-01_00-00-00.json"]])
def test_either_of_ray_tunes_files_marks_its_run(
    files: list[str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "tune_run"
    path.mkdir()
    for name in files:
        (path / name).write_bytes(b"{}")
    assert_refused_as_ray_tunes(path, caplog)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TuneError, match="is not an experiment"):
        tune.Tuner.restore(os.fspath(empty), small)
