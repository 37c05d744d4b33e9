"""Hugging Face's ``Trainer.hyperparameter_search(backend="ray")`` on the facade, with the
real library, offline: a tiny BERT built from a config learns a synthetic task in two
trials. The script (``hf_search.py``) imports ``ray.tune`` as a user's does; the facade
is activated by ``orchestrator.tune.install()`` in it, or by running it under ``python -m
orchestrator tune``. Each runs as its own driver on the session's Ray (``RAY_ADDRESS``),
since the alias is for a whole process; the run is then read back here, without Ray.

What it shows: transformers' calls (``tune.run``, ``with_parameters`` wrapped by its own
function, ``CLIReporter``, ``get_best_trial``, ``ray.tune.schedulers``) are the facade's;
in the trials' workers ``ray.tune.report``/``get_context``/``get_checkpoint`` are ours
(the Trainer imports ``ray.tune`` there); the best run is the run's best; the
checkpoints the Trainer saved reached the run's storage, and a trial that failed went
on from its last one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

from orchestrator import tune  # noqa: E402

from ..support.processes import kill_tree  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("hf_search.py")


def run_search(tmp_path: Path, address: str, *flags: str, cli: bool) -> dict[str, Any]:
    command = [sys.executable, *(["-m", "orchestrator", "tune"] if cli else [])]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "RAY_ADDRESS": address,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    proc = subprocess.Popen(
        [*command, str(SCRIPT), str(tmp_path), *flags],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
            proc.wait()
    assert proc.returncode == 0, err[-4000:]
    (line,) = [x for x in out.splitlines() if x.startswith("BEST ")]
    best: dict[str, Any] = json.loads(line[len("BEST ") :])
    return best


def check_the_run(best: dict[str, Any], tmp_path: Path) -> tune.ExperimentAnalysis:
    assert best["tune"] == "orchestrator.tune"  # the script's `from ray import tune`
    assert best["summary"] == "orchestrator.tune.analysis.ExperimentAnalysis"
    assert Path(best["path"]) == tmp_path / "runs" / "hf"
    analysis = tune.ExperimentAnalysis(best["path"])  # read back from our journal
    trials = {t.trial_id: t for t in analysis.trials}
    assert len(trials) == 2
    assert {t.status for t in trials.values()} == {"TERMINATED"}
    chosen = trials[best["run_id"]]
    objectives = [t.last_result["objective"] for t in trials.values()]
    assert best["objective"] == pytest.approx(min(objectives))
    assert chosen.last_result["objective"] == pytest.approx(best["objective"])
    assert best["hyperparameters"] == chosen.config
    assert set(chosen.config) == {"learning_rate", "seed"}
    assert {"eval_loss", "epoch", "objective"} <= set(chosen.last_result)
    return analysis


def test_hyperparameter_search_runs_on_the_facade_after_install(
    tmp_path: Path, ray_local: Any
) -> None:
    best = run_search(tmp_path, ray_local.address, "--install", "--fail-once", cli=False)
    analysis = check_the_run(best, tmp_path)
    failed = (tmp_path / "failed").read_text()  # the trial that raised at step 3, once
    for trial in analysis.trials:
        history = analysis.trial_dataframes[trial.trial_id].to_dict("records")
        # Evaluations at steps 2 and 4, each reported with the Trainer's checkpoint; the
        # failed trial went on from step 2's, through ray.tune.get_checkpoint().
        assert [r["training_iteration"] for r in history] == [1, 2]
        assert [r["iterations_since_restore"] for r in history] == (
            [1, 1] if trial.trial_id == failed else [1, 2]
        )
        assert trial.num_failures == (1 if trial.trial_id == failed else 0)
        checkpoint = trial.checkpoint
        assert checkpoint is not None  # keep_checkpoints_num=1: the newest
        saved = Path(checkpoint.path)
        assert saved.is_relative_to(tmp_path / "runs" / "hf")
        state = json.loads((saved / "checkpoint-4" / "trainer_state.json").read_text())
        assert state["global_step"] == 4
        assert (saved / "checkpoint-4" / "model.safetensors").is_file()
        assert (saved / "checkpoint-4" / "optimizer.pt").is_file()
        # The Trainer's own output directory is named after our trial id (get_context).
        assert (tmp_path / "trainer" / f"run-{trial.trial_id}").is_dir()


def test_hyperparameter_search_with_a_scheduler_under_the_tune_command(
    tmp_path: Path, ray_local: Any
) -> None:
    best = run_search(tmp_path, ray_local.address, "--scheduler", cli=True)
    check_the_run(best, tmp_path)
