"""Run one restore workload under one system, in this (fresh) process; print figures.

``python -m benchmarks._restore_child '<spec as JSON>'``; ``bench_restore`` starts one
of these per run so that every run gets its own Ray and nothing warm carries over.
"""

from __future__ import annotations

import asyncio
import json
import sys

from ._restore_common import emit


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    system, part = spec["system"], spec["part"]
    if system == "ours":
        from . import _restore_ours as mod

        figures = asyncio.run(getattr(mod, part)(spec))
    elif system == "tune":
        from . import _restore_tune as tmod

        figures = getattr(tmod, part)(spec)
    else:
        print(f"unknown system {system!r}; use ours or tune", file=sys.stderr)
        return 2
    emit(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
