"""What a tracker hook costs the trials: results/s with no tracker, with an MLflow or a
W&B endpoint that hangs, and with a working MLflow (a file store).

Two trials of ``--steps`` trivial steps each (0.25 CPU each) run on a private local Ray
(2 CPUs; or, ``--fake-ray``, on the in-process fake Ray of the tests), under three
hooks lists, interleaved (the order rotates between repeats;
one short run first, not counted, warms the workers up):

* ``none``: no hook;
* ``hanging``: :class:`~orchestrator.integrations.mlflow.MLflowHook` whose tracking URI
  is an HTTP server that accepts connections and never answers (``close_grace=1``: the
  end abandons it after 1 s without progress);
* ``hanging-wandb``: :class:`~orchestrator.integrations.wandb.WandbHook` online, with
  ``WANDB_BASE_URL`` at that server (offline mode cannot hang; ``close_grace=1``); the
  W&B service process it starts is killed after each run;
* ``mlflow-file``: ``MLflowHook`` on a local file store (the tracker keeps up or not:
  what it costs the driver's CPU, and the GIL, to write).

The rate is the trials' own: results / (last result's end - first result's start), by
the results' wall-clock times, so the hook's wait at the experiment's end is left out
(it is reported apart, as ``end``: from the last result to ``run()``'s return).
Reported per case: the median and range of the rate, the ratio of medians to ``none``
(issue 34 asks for a hanging tracker within 10 %), and the tracker's counters (sent,
dropped). Speed belongs here: the tests assert only events
(``tests/engine/test_trackers_run.py``).

``python -m benchmarks.bench_trackers [--steps 10000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._shared import init_private_ray, write_figures
from orchestrator import Orchestrator, Trainable

CASES = ("none", "hanging", "hanging-wandb", "mlflow-file")


class Trivial(Trainable):
    """One trivial step: its wall-clock end is in the result, for the trials' rate."""

    def setup(self, config: dict[str, Any]) -> None:
        self.n = 0

    def step(self) -> dict[str, Any]:
        self.n += 1
        return {"n": self.n, "loss": 1.0 / self.n, "at": time.time()}


def hooks_for(case: str, work: Path, silent_uri: str) -> list[Any]:
    from orchestrator.integrations.mlflow import MLflowHook

    if case == "none":
        return []
    if case == "hanging":
        return [MLflowHook(silent_uri, experiment_name="bench", close_grace=1)]
    if case == "hanging-wandb":
        from orchestrator.integrations.wandb import WandbHook

        os.environ.update(WANDB_BASE_URL=silent_uri, WANDB_API_KEY="x" * 40, WANDB_SILENT="true")
        return [WandbHook("bench", mode="online", dir=work, close_grace=1)]
    return [MLflowHook(f"file://{work / 'mlruns'}", experiment_name="bench", close_grace=60)]


async def one_run(
    case: str, steps: int, work: Path, silent_uri: str, backend: Any = None
) -> dict[str, Any]:
    hooks = hooks_for(case, work, silent_uri)
    extra = {"_ray_backend": backend} if backend is not None else {}
    async with Orchestrator(
        storage=work / "runs", name=case, progress=False, loggers=[], hooks=hooks, **extra
    ) as orch:
        trials = [
            orch.add_trial(
                Trivial,
                {},
                trial_id=f"t{i}",
                stop={"training_iteration": steps},
                resources={"cpu": 0.25},
            )  # fmt: skip
            for i in range(2)
        ]
        await orch.run()
        returned = time.time()
    ats = [r["at"] for t in trials for r in t.results]
    firsts = [t.results[0] for t in trials]
    begun = min(r["at"] - r["time_this_iter_s"] for r in firsts)
    results = sum(len(t.results) for t in trials)
    row: dict[str, Any] = {
        "case": case,
        "results": results,
        "rate": results / (max(ats) - begun),
        "end_s": returned - max(ats),
    }
    if case == "hanging-wandb":
        end_wandb_service()
    if hooks:
        stats = hooks[0].statistics()
        row.update(sent=stats.sent, dropped=stats.dropped, failures=stats.failures)
    return row


def end_wandb_service() -> None:
    """Kill the W&B service process (stuck on the silent server) and forget it."""
    import contextlib

    import psutil

    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "wandb" in " ".join(child.cmdline()):
                child.kill()
                child.wait(30)
    if "wandb" in sys.modules:
        with contextlib.suppress(ConnectionError):
            sys.modules["wandb"].teardown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10_000, help="steps per trial")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--cases", nargs="+", choices=CASES, default=list(CASES), help="'none' is always run"
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/trackers.json"))
    parser.add_argument(
        "--fake-ray",
        action="store_true",
        help="the trials on tests/support/fakeray.py (in-process) instead of a private Ray: the "
        "driver's own cost, where a tracker's cost lies, without Ray's",
    )
    args = parser.parse_args()
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 refuses it otherwise
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.support.trackers import silent_server

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-trackers-") as tmp, silent_server() as uri:
        backend = None
        if args.fake_ray:
            from tests.support.fakeray import FakeRay

            backend = FakeRay(Path(tmp) / "nodes")
        else:
            init_private_ray(2)
        # Not counted: the first run here pays for the workers' start and first imports;
        # and MLflow is imported (once per driver, in the hook's thread at its first
        # trial: 1-2 s of the driver's GIL, a one-off cost not compared here).
        asyncio.run(one_run("none", min(args.steps, 500), Path(tmp) / "warm-up", uri, backend))
        import mlflow.tracking  # noqa: F401
        import wandb  # noqa: F401

        for repeat in range(args.repeat):
            cases = tuple(c for c in CASES if c == "none" or c in args.cases)
            turn = repeat % len(cases)
            order = cases[turn:] + cases[:turn]
            for case in order:
                work = Path(tmp) / f"{case}-{repeat}"
                row = asyncio.run(one_run(case, args.steps, work, uri, backend))
                row["repeat"] = repeat
                rows.append(row)
                extra = f", sent {row['sent']}, dropped {row['dropped']}" if "sent" in row else ""
                print(
                    f"[{time.strftime('%H:%M:%S')}] {case} #{repeat}: {row['rate']:,.0f} "
                    f"results/s, end {row['end_s']:.1f} s{extra}",
                    flush=True,
                )
                write_figures(args.out, "bench_trackers", vars(args), None, rows)

    summary: dict[str, Any] = {}
    base = statistics.median(r["rate"] for r in rows if r["case"] == "none")
    print(f"\n{'case':14} {'median results/s':>17} {'range':>17} {'ratio':>6} {'end s':>6}")
    for case in [c for c in CASES if any(r["case"] == c for r in rows)]:
        rates = [r["rate"] for r in rows if r["case"] == case]
        ends = [r["end_s"] for r in rows if r["case"] == case]
        median = statistics.median(rates)
        summary[case] = {
            "median": median,
            "min": min(rates),
            "max": max(rates),
            "ratio": median / base,
            "end_s": statistics.median(ends),
        }
        spread = f"{min(rates):,.0f}-{max(rates):,.0f}"
        print(
            f"{case:14} {median:17,.0f} {spread:>17} {median / base:6.2f} "
            f"{statistics.median(ends):6.1f}"
        )
    for case in ("hanging", "hanging-wandb"):
        if case in summary:
            print(f"{case} / none: {summary[case]['ratio']:.2f} (target >= 0.90)")
    write_figures(args.out, "bench_trackers", vars(args), summary, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
