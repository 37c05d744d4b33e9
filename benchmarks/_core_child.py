"""Run one system once, in this (fresh) process, and print its figures.

``python -m benchmarks._core_child '<RunSpec as JSON>'``; ``bench_core`` starts one of
these per run so that every run gets its own Ray and nothing warm carries over.
"""

from __future__ import annotations

import asyncio
import json
import sys

from ._core_common import RunSpec, emit


def main(argv: list[str]) -> int:
    spec = RunSpec(**json.loads(argv[0]))
    if spec.system == "ours":
        from . import _core_ours

        figures = asyncio.run(_core_ours.run(spec))
    elif spec.system == "tune":
        from . import _core_tune

        figures = _core_tune.run(spec)
    elif spec.system == "raw":
        from . import _core_raw

        figures = asyncio.run(_core_raw.run(spec))
    else:
        print(f"unknown system {spec.system!r}; use ours, tune or raw", file=sys.stderr)
        return 2
    emit(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
