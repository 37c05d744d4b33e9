"""Ray Tune's examples on Ray Tune and on trialflow's facade, side by side.

Each of the framework-free examples in the installed ``ray.tune.examples`` (and
``xgboost_example``, ``lightgbm_example``, ``mlflow_example`` where their framework is
installed) runs with
``--smoke-test`` in a fresh process, once on Ray Tune and once rewritten for
``orchestrator.tune`` (only its import lines: :mod:`benchmarks.tune_examples`), the
two systems interleaved (the order alternates between repeats), each run with its own
home directory and private local Ray. Both systems get the same RNG seed before the
script starts. Reported per example: the median and range of the whole process's
seconds (``e2e``: Python and Ray's start and stop included, the same work for both) and
of ``Tuner.fit()``'s seconds (what the tuning system itself takes), the ratios ours /
Tune's, and the totals over all examples (target: ours <= 0.5x Tune's).

Equivalence: where Tune's sampler is deterministic (its ``BasicVariantGenerator`` with
NumPy's seeded global RNG, and a seeded ``OptunaSearch``), both systems must have run
the same configs in the same order (a PBT run's final configs differ by its exploits,
so those examples are left out of that check). The exit status is 1 if any run failed
or any equivalence check did not hold.

``python -m benchmarks.bench_tune_examples [--repeat 2] [--only NAME ...]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._shared import write_figures
from benchmarks.tune_examples import EXAMPLES, WITH_FRAMEWORK, Run, run_example

#: Examples whose configs both systems must sample identically for a seed.
DETERMINISTIC = (
    "async_hyperband_example",
    "custom_checkpointing_with_callback",
    "custom_func_checkpointing",
    "hyperband_example",
    "hyperband_function_example",
    "logging_example",
    "tune_basic_example",
    "optuna_seeded",
)

#: A Tune script (not one of Tune's examples) for the seeded OptunaSearch check.
OPTUNA_SEEDED = """\
from ray import tune
from ray.tune.search import ConcurrencyLimiter
from ray.tune.search.optuna import OptunaSearch


def objective(config):
    tune.report({"loss": (config["x"] - 0.3) ** 2 + config["y"], "iterations": 1})


if __name__ == "__main__":
    tuner = tune.Tuner(
        objective,
        param_space={"x": tune.uniform(-1, 1), "y": tune.loguniform(1e-3, 1),
                     "k": tune.choice(["a", "b", "c"]), "n": tune.randint(1, 9)},
        tune_config=tune.TuneConfig(
            metric="loss", mode="min", num_samples=10,
            search_alg=ConcurrencyLimiter(OptunaSearch(seed=0), max_concurrent=1),
        ),
    )
    print("Best config:", tuner.fit().get_best_result().config)
"""

SEED = 0


def one_run(name: str, system: str, workdir: Path) -> Run:
    source = OPTUNA_SEEDED if name == "optuna_seeded" else None
    return run_example(name, system, workdir, seed=SEED, source=source, timeout=1200)


def fit_seconds(run: Run) -> float | None:
    return sum(r["seconds"] for r in run.records) if run.records else None


def configs(run: Run) -> list[Any]:
    return [c for r in run.records for c in r["configs"]]


def spread(values: list[float]) -> str:
    return f"{min(values):.1f}-{max(values):.1f}" if values else "-"


def installed(examples: dict[str, str]) -> list[str]:
    """The examples whose framework can be imported here."""
    import importlib.util

    return [name for name, module in examples.items() if importlib.util.find_spec(module)]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/tune_examples.json"))
    args = parser.parse_args()
    names = list(args.only or [*EXAMPLES, "optuna_seeded", *installed(WITH_FRAMEWORK)])
    runs: list[dict[str, Any]] = []
    failures: list[str] = []
    mismatches: list[str] = []
    by: dict[tuple[str, str], list[Run]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tune-examples-") as tmp:
        for repeat in range(args.repeat):
            for index, name in enumerate(names):
                order = ("tune", "ours") if (repeat + index) % 2 == 0 else ("ours", "tune")
                for system in order:
                    workdir = Path(tmp) / f"{name}-{system}-{repeat}"
                    run = one_run(name, system, workdir)
                    by.setdefault((name, system), []).append(run)
                    fit = fit_seconds(run)
                    fit_text = f"{fit:.1f}" if fit is not None else "-"
                    print(
                        f"[{time.strftime('%H:%M:%S')}] {name} {system} #{repeat}: rc "
                        f"{run.returncode}, {run.seconds:.1f} s (fit {fit_text} s) | "
                        f"{run.best_line[:120]}",
                        flush=True,
                    )
                    runs.append(
                        {
                            "example": name,
                            "system": system,
                            "repeat": repeat,
                            "returncode": run.returncode,
                            "e2e_s": run.seconds,
                            "fit_s": fit,
                            "best_line": run.best_line,
                            "configs": configs(run),
                        }
                    )
                    if run.returncode != 0:
                        failures.append(f"{name} on {system} (#{repeat})")
                        print(run.stderr[-2000:], file=sys.stderr)
            write_figures(args.out, "bench_tune_examples", vars(args), None, runs)

    print()
    header = f"{'example':38} {'Tune e2e':>14} {'ours e2e':>14} {'ratio':>6} "
    header += f"{'Tune fit':>14} {'ours fit':>14} {'ratio':>6}"
    print(header)
    totals = {"tune_e2e": 0.0, "ours_e2e": 0.0, "tune_fit": 0.0, "ours_fit": 0.0}
    summary: dict[str, Any] = {"examples": {}}
    for name in names:
        row: dict[str, Any] = {}
        for system in ("tune", "ours"):
            done = [r for r in by.get((name, system), []) if r.returncode == 0]
            e2e = [r.seconds for r in done]
            fits = [f for r in done if (f := fit_seconds(r)) is not None]
            row[system] = {
                "e2e": median(e2e),
                "e2e_range": spread(e2e),
                "fit": median(fits),
                "fit_range": spread(fits),
            }
            totals[f"{system}_e2e"] += median(e2e)
            totals[f"{system}_fit"] += median(fits)
        t, o = row["tune"], row["ours"]
        print(
            f"{name:38} {t['e2e']:6.1f} ({t['e2e_range']:>7}) {o['e2e']:6.1f} ({o['e2e_range']:>7})"
            f" {o['e2e'] / t['e2e']:6.2f} {t['fit']:6.1f} ({t['fit_range']:>7})"
            f" {o['fit']:6.1f} ({o['fit_range']:>7}) {o['fit'] / t['fit']:6.2f}"
        )
        if name in DETERMINISTIC:
            tune_runs, our_runs = by.get((name, "tune"), []), by.get((name, "ours"), [])
            same = bool(tune_runs and our_runs) and all(
                configs(a) == configs(b) and configs(a)
                for a, b in zip(tune_runs, our_runs, strict=False)
            )
            row["same_configs"] = same
            if not same:
                mismatches.append(name)
        summary["examples"][name] = row
    e2e_ratio = totals["ours_e2e"] / totals["tune_e2e"]
    fit_ratio = totals["ours_fit"] / totals["tune_fit"]
    summary.update(totals=totals, e2e_ratio=e2e_ratio, fit_ratio=fit_ratio)
    print(
        f"\ntotal e2e: ours {totals['ours_e2e']:.1f} s, Tune {totals['tune_e2e']:.1f} s: "
        f"{e2e_ratio:.2f}x   total fit(): ours {totals['ours_fit']:.1f} s, Tune "
        f"{totals['tune_fit']:.1f} s: {fit_ratio:.2f}x (target <= 0.5x)"
    )
    checked = [n for n in names if n in DETERMINISTIC]
    print(
        f"same configs in the same order (seed {SEED}): "
        f"{len(checked) - len(mismatches)} of {len(checked)} "
        f"({', '.join(mismatches) or 'all equal'})"
    )
    if failures:
        print(f"failed runs: {', '.join(failures)}")
    write_figures(args.out, "bench_tune_examples", vars(args), summary, runs)
    return 1 if failures or mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
