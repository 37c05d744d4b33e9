"""``python -m orchestrator tune SCRIPT``: a Ray Tune script's ray.tune imports resolve
to orchestrator.tune (checked in a fresh interpreter, without Ray starting)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """\
import sys
from ray import tune
from ray.tune.schedulers import ASHAScheduler
from ray.tune.search.optuna import OptunaSearch
import orchestrator.tune, orchestrator.tune.schedulers
assert tune is orchestrator.tune
assert ASHAScheduler is orchestrator.tune.schedulers.ASHAScheduler
print("args", sys.argv[1:])
sys.exit(3)
"""


def test_a_tune_script_runs_unchanged_with_its_arguments_and_exit_status(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "tune", str(script), "--smoke-test", "x"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    assert "args ['--smoke-test', 'x']" in done.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "orchestrator", "tune", str(tmp_path / "nope.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2 and "no such script" in missing.stderr


#: Scripts that fail as a user's first try may: each must fail as under ``python``.
FAILING = {
    "syntax": "x = 1\nif x = 2:\n    pass\n",
    "raises": 'def train():\n    raise ValueError("bad config") from KeyError("lr")\n\ntrain()\n',
    "imports_a_broken_module": "import helper\n",
}


def test_a_failing_script_shows_its_own_traceback_as_python_would(tmp_path: Path) -> None:
    (tmp_path / "helper.py").write_text("values = (1,\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name, source in FAILING.items():
        script = tmp_path / f"{name}.py"
        script.write_text(source)
        python, ours = (
            subprocess.run(
                [sys.executable, *command, str(script)],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            for command in ([], ["-m", "orchestrator", "tune"])
        )
        assert python.returncode == ours.returncode == 1, name
        assert ours.stderr == python.stderr, name  # the script's frames only, as python
        assert str(script) in ours.stderr and "orchestrator" not in ours.stderr, name


#: Ray Tune's framework callbacks resolve to the facade's, under their Ray module paths.
INTEGRATIONS = """\
import importlib, sys
for framework in sys.argv[1:]:
    theirs = importlib.import_module(f"ray.tune.integration.{framework}")
    assert theirs.__name__ == f"orchestrator.tune.integration.{framework}", theirs
    assert theirs.TuneReportCheckpointCallback.__module__ == theirs.__name__
print("ok", sys.argv[1:])
"""


def test_the_framework_callbacks_import_lines_resolve_to_the_facade(tmp_path: Path) -> None:
    import importlib.util

    present = [
        framework
        for framework, package in (
            ("xgboost", "xgboost"),
            ("lightgbm", "lightgbm"),
            ("pytorch_lightning", "lightning"),
            ("keras", "keras"),
        )
        if importlib.util.find_spec(package) is not None
    ]
    script = tmp_path / "script.py"
    script.write_text(INTEGRATIONS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERAS_BACKEND": "torch"}
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "tune", str(script), *present],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert f"ok {present}" in done.stdout
