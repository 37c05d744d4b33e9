"""Ray Tune's tested behaviours on Ray Tune and on trialflow's facade: how many hold.

Each case of :mod:`benchmarks.tune_compat` (one public-API behaviour that Ray Tune's
tests or documentation code check, written in our own words) runs once on Ray Tune
(``ray.tune``) and once on ours (``orchestrator.tune``), each system in a process of
its own with a private 2-CPU Ray. Printed: each case's outcome on both, then the
totals: cases passing on Tune, and of those, passing on ours (the figure; target 90%).
A case failing on Tune is listed but not counted.

``python -m benchmarks.bench_tune_compat [--only SUBSTRING ...] [--system tune ours]``:
each system's outcomes are kept in ``benchmarks/out/tune_compat_<system>.json``; with
``--only`` the cases named run again and replace theirs there, and with ``--system``
only those systems run (the other's outcomes are read from its file).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._shared import write_figures

ROOT = Path(__file__).resolve().parent.parent


def run_system(system: str, out: Path, only: list[str] | None) -> dict[str, Any]:
    """Run the cases (``only``: those whose id contains one of these) on ``system`` in a
    process of its own; their outcomes replace those in ``out`` (kept between runs, so
    a few cases can be run again)."""
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("RAY_ADDRESS", None)
    kept = json.loads(out.read_text()) if out.exists() and only else {}
    with tempfile.TemporaryDirectory(prefix="bench-tune-compat-") as tmp:
        fresh = Path(tmp) / f"{system}.json"
        command = [sys.executable, "-m", "benchmarks.tune_compat.child", system, str(fresh)]
        if only:
            command += ["--only", *only]
        subprocess.run(command, cwd=ROOT, env=env, check=False)
        kept.update(json.loads(fresh.read_text()) if fresh.exists() else {})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(kept, indent=1) + "\n")
    return kept


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--system", nargs="*", default=["tune", "ours"])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/tune_compat.json"))
    args = parser.parse_args()
    from benchmarks.tune_compat.child import load_cases

    declared = list(load_cases())
    outcomes: dict[str, dict[str, Any]] = {}
    for system in ("tune", "ours"):
        path = args.out.with_name(f"{args.out.stem}_{system}.json")
        if system in args.system:
            started = time.monotonic()
            outcomes[system] = run_system(system, path, args.only)
            print(f"{system}: {len(outcomes[system])} cases, {time.monotonic() - started:.0f} s")
        else:
            outcomes[system] = json.loads(path.read_text()) if path.exists() else {}
    tune, ours = outcomes["tune"], outcomes["ours"]
    ids = [i for i in declared if i in tune or i in ours]
    width = max((len(i) for i in ids), default=10)
    print(f"\n{'case':<{width}}  tune  ours")
    for case_id in ids:
        t, o = tune.get(case_id, {}), ours.get(case_id, {})
        print(f"{case_id:<{width}}  {_mark(t):<4}  {_mark(o)}")
    on_tune = [i for i in ids if tune.get(i, {}).get("ok")]
    both = [i for i in on_tune if ours.get(i, {}).get("ok")]
    short = [i for i in on_tune if not ours.get(i, {}).get("ok")]
    not_tune = [i for i in ids if not tune.get(i, {}).get("ok")]
    share = 100.0 * len(both) / len(on_tune) if on_tune else 0.0
    ours_total = sum(1 for i in ids if ours.get(i, {}).get("ok"))
    print(
        f"\ncases: {len(ids)} of {len(declared)}; pass on Tune: {len(on_tune)}; "
        f"on ours: {ours_total}"
    )
    print(f"pass on ours of those passing on Tune: {len(both)} of {len(on_tune)} ({share:.0f}%)")
    for label, group, side in (("fail on ours", short, ours), ("fail on Tune", not_tune, tune)):
        if group:
            print(f"\n{label}:")
            for case_id in group:
                print(f"  {case_id}: {side.get(case_id, {}).get('error', 'not run')}")
    summary = {
        "cases": len(ids),
        "pass_tune": len(on_tune),
        "pass_both": len(both),
        "percent": round(share, 1),
        "fail_ours": short,
        "fail_tune": not_tune,
    }
    write_figures(args.out, "tune_compat", vars(args), summary, [outcomes])
    return 0 if share >= 90.0 else 1


def _mark(outcome: dict[str, Any]) -> str:
    if not outcome:
        return "-"
    return "pass" if outcome.get("ok") else "FAIL"


if __name__ == "__main__":
    sys.exit(main())
