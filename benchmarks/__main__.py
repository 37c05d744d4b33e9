"""``python -m benchmarks``: run every ``benchmarks/bench_*.py`` module's ``main()`` in turn.

Each benchmark parses its own options from ``sys.argv``; this runner passes none, so
every benchmark runs with its defaults. A failing benchmark is reported and the others
still run; the exit status is non-zero if any failed.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import traceback
from pathlib import Path


def main() -> int:
    here = Path(__file__).resolve().parent
    names = sorted(
        info.name for info in pkgutil.iter_modules([str(here)]) if info.name.startswith("bench_")
    )
    failed: list[str] = []
    for name in names:
        print(f"=== benchmarks.{name} ===", flush=True)
        argv, sys.argv = sys.argv, [f"benchmarks.{name}"]
        try:
            module = importlib.import_module(f"benchmarks.{name}")
            status = module.main()
            if status:
                failed.append(name)
        except Exception:
            traceback.print_exc()
            failed.append(name)
        finally:
            sys.argv = argv
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
