"""Run one ``bench_function_ckpt`` workload under one system, in this (fresh) process,
and print its figures.

``python -m benchmarks._function_ckpt_child '<spec as JSON>'``; the parent starts one
per run so that every run gets its own Ray and nothing warm carries over.
"""

from __future__ import annotations

import asyncio
import json
import sys

from ._function_ckpt_common import emit


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    if spec["system"] == "ours":
        from . import _function_ckpt_ours

        figures = asyncio.run(_function_ckpt_ours.run(spec))
    elif spec["system"] == "tune":
        from . import _function_ckpt_tune

        figures = _function_ckpt_tune.run(spec)
    else:
        print(f"unknown system {spec['system']!r}; use ours or tune", file=sys.stderr)
        return 2
    emit(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
