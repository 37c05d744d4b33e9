"""Ray Tune's examples on Tune and on the facade, with the CPU seconds of each whole run.

``bench_tune_examples`` times the examples; on a machine others load, wall times spread
2-4x. This runs the same ``run_example`` (a fresh process, a private local Ray, the
import lines rewritten for ours) and also sums the CPU seconds of the run's process tree
(the driver, Ray's processes, the workers), polled every 0.2 s while it runs: a figure
the machine's load barely changes. A Tune run whose Ray start timed out (Tune does not
retry it) is run again, up to 3 times; every attempt is recorded.

``python -m benchmarks.bench_examples_cpu [--repeat 2] NAME ...``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.tune_examples import Run, run_example

ATTEMPTS = 3


def measured(name: str, system: str, workdir: Path) -> tuple[Run, float]:
    """The run, and the CPU seconds of every process it started (its tree)."""
    import psutil

    seen: dict[int, float] = {}
    stop = threading.Event()
    me = psutil.Process()

    def poll() -> None:
        while not stop.is_set():
            for proc in me.children(recursive=True):
                try:
                    times = proc.cpu_times()
                except psutil.Error:
                    continue
                seen[proc.pid] = times.user + times.system
            time.sleep(0.2)

    thread = threading.Thread(target=poll, name="cpu-poll", daemon=True)
    thread.start()
    try:
        run = run_example(name, system, workdir, seed=0, timeout=1200)
    finally:
        stop.set()
        thread.join()
    return run, sum(seen.values())


def main() -> int:
    import psutil

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="+")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/examples_cpu.json"))
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-examples-cpu-") as tmp:
        for repeat in range(args.repeat):
            for index, name in enumerate(args.names):
                order = ("tune", "ours") if (repeat + index) % 2 == 0 else ("ours", "tune")
                for system in order:
                    for attempt in range(ATTEMPTS):
                        workdir = Path(tmp) / f"{name}-{system}-{repeat}-{attempt}"
                        run, cpu = measured(name, system, workdir)
                        fit = sum(r["seconds"] for r in run.records) if run.records else None
                        row = {
                            "example": name, "system": system, "repeat": repeat,
                            "attempt": attempt, "rc": run.returncode, "e2e_s": run.seconds,
                            "fit_s": fit, "cpu_s": cpu, "load": psutil.getloadavg()[0],
                        }  # fmt: skip
                        rows.append(row)
                        print(json.dumps(row), flush=True)
                        args.out.parent.mkdir(parents=True, exist_ok=True)
                        args.out.write_text(json.dumps(rows, indent=1))
                        if run.returncode == 0:
                            break
                        print(run.stderr[-1000:], file=sys.stderr)
    done = {(r["example"], r["system"], r["repeat"]) for r in rows if r["rc"] == 0}
    tried = {(r["example"], r["system"], r["repeat"]) for r in rows}
    return 0 if done == tried else 1  # 1: a run failed every attempt


if __name__ == "__main__":
    sys.exit(main())
