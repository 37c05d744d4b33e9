"""One system's run of every case, in a process of its own with a private Ray:
``python -m benchmarks.tune_compat.child tune|ours OUT.json [--only SUBSTRING ...]``.

Each case gets a fresh storage directory and at most :data:`LIMIT` seconds (SIGALRM);
its outcome (``pass``, or ``fail`` with the exception's type and first line) is
written to ``OUT.json`` after each case, so a crash keeps what ran.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

#: Seconds a case may take (a loaded 2-core machine: generous).
LIMIT = 240


class CaseTimeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout(f"case took more than {LIMIT} s")


def load_cases() -> dict[str, Any]:
    """Every case, by id, in the order declared."""
    from benchmarks.tune_compat import (  # noqa: F401
        cases_function,
        cases_more,
        cases_restore_more,
        cases_results,
        cases_sample,
        cases_search,
        cases_stopper,
        cases_tuner,
    )
    from benchmarks.tune_compat.system import CASES

    return dict(CASES)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("system", choices=("tune", "ours"))
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    logging.getLogger("ray").setLevel(logging.ERROR)
    import ray

    from benchmarks.tune_compat.system import System

    cases = load_cases()

    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
    )
    signal.signal(signal.SIGALRM, _alarm)
    outcomes: dict[str, Any] = {}
    for case_id, fn in cases.items():
        if args.only and not any(s in case_id for s in args.only):
            continue
        system = System(args.system)
        started = time.monotonic()
        signal.alarm(LIMIT)
        try:
            fn(system)
            outcome: dict[str, Any] = {"ok": True}
        except BaseException as err:  # noqa: BLE001 - every outcome is a figure
            if isinstance(err, KeyboardInterrupt) and not isinstance(err, CaseTimeout):
                raise
            lines = str(err).strip().splitlines() or [""]
            outcome = {
                "ok": False,
                "error": f"{type(err).__name__}: {lines[0][:300]}",
                "where": "".join(traceback.format_tb(err.__traceback__)[-2:])[-1200:],
            }
        finally:
            signal.alarm(0)
            system.fresh()
        outcome["seconds"] = round(time.monotonic() - started, 2)
        outcomes[case_id] = outcome
        mark = "pass" if outcome["ok"] else "FAIL " + outcome["error"][:150]
        print(f"[{args.system}] {case_id}: {mark} ({outcome['seconds']} s)", flush=True)
        args.out.write_text(json.dumps(outcomes, indent=1) + "\n")
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
