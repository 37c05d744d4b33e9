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
