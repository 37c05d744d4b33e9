"""Ray Tune's own examples, run on Ray Tune or on trialflow's facade after rewriting only
their import lines.

``rewrite`` changes ``from ray import tune`` to ``from orchestrator import tune`` and
``from ray.tune.X import Y`` to ``from orchestrator.tune.X import Y`` (``import ray`` and
every other line stay); ``run_example`` copies an example from the installed
``ray.tune.examples``, rewritten or not, into a directory and runs it with
``--smoke-test`` in a fresh Python, with a home directory of its own (so
``~/ray_results`` is the run's; and TMPDIR for those writing there), a private local Ray
(``RAY_ADDRESS=local``), and
optionally the RNGs seeded before the script starts and the configs of its trials
written to a file (through a wrapper script: the example itself is not changed).

``python -m benchmarks.tune_examples [NAME ...] [--system ours|tune]`` runs examples and
prints each one's last lines (its "best" line) and its time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: The examples that need no framework beyond Ray Tune, NumPy and Optuna.
EXAMPLES = (
    "async_hyperband_example",
    "custom_checkpointing_with_callback",
    "custom_func_checkpointing",
    "hyperband_example",
    "hyperband_function_example",
    "logging_example",
    "optuna_define_by_run_example",
    "optuna_example",
    "optuna_multiobjective_example",
    "pbt_example",
    "pbt_function",
    "tune_basic_example",
)

#: Examples of NEEDS_FRAMEWORK that run here once their framework is installed (the
#: ``frameworks`` and ``trackers`` extras): the framework's module, to check for it.
#: (``mnist_ptl_mini`` and ``tune_mnist_keras`` download MNIST, and need torchvision and
#: TensorFlow: they cannot run offline.)
WITH_FRAMEWORK = {
    "xgboost_example": "xgboost",
    "lightgbm_example": "lightgbm",
    "mlflow_example": "mlflow",
}

#: Examples whose smoke test writes into ``tempfile.gettempdir()`` (``mlflow_example``:
#: its MLflow store, ``/tmp/mlruns``): each run gets its working directory as TMPDIR,
#: Ray's own temporary directory staying where it was. And what else an example needs
#: in its environment: MLflow 3 refuses the file store the smoke test uses unless told
#: to allow it (on Ray Tune as here).
PRIVATE_TMP = frozenset({"mlflow_example"})
EXAMPLE_ENV = {"mlflow_example": {"MLFLOW_ALLOW_FILE_STORE": "true"}}

#: The other examples shipped with ray.tune.examples, and what each needs.
NEEDS_FRAMEWORK = {
    "ax_example": "Ax",
    "bayesopt_example": "bayesian-optimization",
    "bohb_example": "ConfigSpace, hpbandster",
    "cifar10_pytorch": "PyTorch, torchvision",
    "hyperopt_conditional_search_space_example": "hyperopt",
    "lightgbm_example": "LightGBM, scikit-learn",
    "mlflow_example": "MLflow",
    "mlflow_ptl": "MLflow, PyTorch Lightning",
    "mnist_ptl_mini": "PyTorch Lightning, datasets",
    "mnist_pytorch": "PyTorch, torchvision",
    "mnist_pytorch_trainable": "PyTorch, torchvision",
    "nevergrad_example": "nevergrad",
    "pb2_example": "GPy, scikit-learn (PB2)",
    "pb2_ppo_example": "RLlib, GPy",
    "pbt_convnet_example": "PyTorch, torchvision",
    "pbt_convnet_function_example": "PyTorch, torchvision",
    "pbt_dcgan_mnist": "PyTorch, torchvision",
    "pbt_memnn_example": "TensorFlow",
    "pbt_ppo_example": "RLlib",
    "pbt_transformers": "transformers, PyTorch",
    "pbt_tune_cifar10_with_keras": "TensorFlow",
    "tf_mnist_example": "TensorFlow",
    "tune_mnist_keras": "TensorFlow",
    "xgboost_dynamic_resources_example": "XGBoost, scikit-learn",
    "xgboost_example": "XGBoost, scikit-learn",
}

_IMPORTS = [
    (re.compile(r"^(\s*)from ray import tune\b"), r"\1from orchestrator import tune"),
    (re.compile(r"^(\s*)from ray\.tune(\.[\w.]+)? import "), r"\1from orchestrator.tune\2 import "),
    (re.compile(r"^(\s*)import ray\.tune(\.[\w.]+)? as "), r"\1import orchestrator.tune\2 as "),
    (
        re.compile(r"^(\s*)from ray\.air\.integrations\.(mlflow|wandb) import "),
        r"\1from orchestrator.tune.integration.\2 import ",
    ),
]

#: Run before the example in the same process: seed the RNGs, and write every trial's
#: config (in the run's order) and the run's seconds to $TUNE_EXAMPLE_OUT after fit().
_WRAPPER = """\
import json, os, random, runpy, sys, time
seed = os.environ.get("TUNE_EXAMPLE_SEED")
if seed is not None:
    import numpy
    numpy.random.seed(int(seed))
    random.seed(int(seed))
out = os.environ.get("TUNE_EXAMPLE_OUT")
if out:
    module = __import__(os.environ["TUNE_EXAMPLE_TUNER"], fromlist=["Tuner"])
    fit = module.Tuner.fit
    def recorded_fit(self, *args, **kwargs):
        started = time.perf_counter()
        grid = fit(self, *args, **kwargs)
        record = {"seconds": time.perf_counter() - started,
                  "configs": [dict(r.config) for r in grid]}
        with open(out, "a") as f:
            f.write(json.dumps(record, default=repr) + "\\n")
        return grid
    module.Tuner.fit = recorded_fit
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
"""


def examples_dir() -> Path:
    """The installed ray.tune.examples (found without importing ray)."""
    import importlib.util

    spec = importlib.util.find_spec("ray")
    assert spec is not None and spec.origin is not None, "ray is not installed"
    return Path(spec.origin).parent / "tune" / "examples"


def rewrite(source: str) -> str:
    """``source`` with its Ray Tune import lines pointed at orchestrator.tune; no other
    line changes (a test checks that)."""
    lines = []
    for line in source.splitlines(keepends=True):
        for pattern, replacement in _IMPORTS:
            line = pattern.sub(replacement, line)
        lines.append(line)
    return "".join(lines)


@dataclass(frozen=True)
class Run:
    example: str
    system: str
    returncode: int
    seconds: float
    stdout: str
    stderr: str
    records: list[dict[str, Any]]

    @property
    def best_line(self) -> str:
        """The example's last line naming the best (its answer), else its last line."""
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        found = [line for line in lines if "best" in line.lower()]
        return found[-1] if found else (lines[-1] if lines else "")


def run_example(
    name: str,
    system: str,
    workdir: Path,
    *,
    seed: int | None = None,
    timeout: float = 900.0,
    python: str = sys.executable,
    extra_env: dict[str, str] | None = None,
    source: str | None = None,
) -> Run:
    """Copy example ``name`` (or the Tune script ``source``) into ``workdir`` (rewritten
    for ``system="ours"``) and run it with ``--smoke-test`` in a fresh process;
    ``workdir`` is also its home."""
    if source is None:
        source = (examples_dir() / f"{name}.py").read_text()
    if system == "ours":
        source = rewrite(source)
    elif system != "tune":
        raise ValueError(f"system must be 'ours' or 'tune', got {system!r}")
    workdir.mkdir(parents=True, exist_ok=True)
    script = workdir / f"{name}.py"
    script.write_text(source)
    wrapper = workdir / "_run_example.py"
    wrapper.write_text(_WRAPPER)
    out = workdir / "records.jsonl"
    out.unlink(missing_ok=True)
    env = {
        **os.environ,
        "HOME": str(workdir),
        "RAY_ADDRESS": "local",
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "TUNE_EXAMPLE_OUT": str(out),
        "TUNE_EXAMPLE_TUNER": "orchestrator.tune" if system == "ours" else "ray.tune",
        **EXAMPLE_ENV.get(name, {}),
        **(extra_env or {}),
    }
    if name in PRIVATE_TMP:
        env.update(TMPDIR=str(workdir), RAY_TMPDIR=os.environ.get("RAY_TMPDIR", "/tmp"))
    if seed is not None:
        env["TUNE_EXAMPLE_SEED"] = str(seed)
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [python, str(wrapper), str(script), "--smoke-test"],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as err:
        returncode = -9
        stdout = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
        stderr = err.stderr.decode() if isinstance(err.stderr, bytes) else (err.stderr or "")
    seconds = time.perf_counter() - started
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return Run(name, system, returncode, seconds, stdout, stderr, records)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=list(EXAMPLES))
    parser.add_argument("--system", choices=("ours", "tune"), default="ours")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the working directories")
    args = parser.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="tune-examples-") as tmp:
        for name in args.names:
            workdir = Path(tmp) / f"{name}-{args.system}"
            run = run_example(name, args.system, workdir, seed=args.seed)
            status = "ok" if run.returncode == 0 else f"FAILED ({run.returncode})"
            print(f"{name} [{args.system}] {status} in {run.seconds:.1f} s: {run.best_line}")
            if run.returncode != 0:
                failed += 1
                print(run.stderr[-3000:], file=sys.stderr)
            if args.keep:
                print(f"  kept in {workdir}")
        if args.keep:
            input("press Enter to remove the working directories")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
