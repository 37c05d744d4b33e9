"""Run one sweep workload under one system, in this (fresh) process; print its figures.

``python -m benchmarks._sweep_child '<spec as JSON>'`` (``spec["system"]``: ``ours`` or
``tune``); ``bench_sweep`` starts one of these per run.
"""

from __future__ import annotations

import asyncio
import json
import sys

from ._sweep_common import emit_figures


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    # Ray's import out of both systems' clocks: the peer's module pays it when it is
    # imported, before its clock starts; ours imports Ray only when it starts it.
    import ray  # noqa: F401

    if spec["system"] == "ours":
        from . import _sweep_ours

        figures = asyncio.run(_sweep_ours.run(spec))
    elif spec["system"] == "tune":
        from . import _sweep_tune

        figures = _sweep_tune.run(spec)
    else:
        print(f"unknown system {spec['system']!r}; use ours or tune", file=sys.stderr)
        return 2
    emit_figures(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
