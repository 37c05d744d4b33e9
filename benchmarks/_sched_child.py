"""Run one scheduler workload under one system, in this (fresh) process; print its figures.

``python -m benchmarks._sched_child '<spec as JSON>'`` (``spec["system"]``: ``ours`` or
``tune``; ``spec["workload"]``: ``asha`` or ``pbt``); ``bench_schedulers`` starts one of
these per run.
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

    system, workload = spec["system"], spec["workload"]
    if workload not in ("asha", "pbt"):
        print(f"unknown workload {workload!r}; use asha or pbt", file=sys.stderr)
        return 2
    if system == "ours":
        from . import _sched_ours

        figures = asyncio.run(getattr(_sched_ours, f"run_{workload}")(spec))
    elif system == "tune":
        from . import _sched_tune

        figures = getattr(_sched_tune, f"run_{workload}")(spec)
    else:
        print(f"unknown system {system!r}; use ours or tune", file=sys.stderr)
        return 2
    emit_figures(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
