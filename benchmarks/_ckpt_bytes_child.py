"""Run one ``bench_checkpoint_bytes`` workload under one system, in this (fresh)
process, and print its figures.

``python -m benchmarks._ckpt_bytes_child '<spec as JSON>'``; the parent starts one per
run, so every run gets its own Ray and nothing warm carries over. "today" is "ours"
with ``TRIALFLOW_CHECKPOINT_DEDUP=0``: the spec's ``env`` is applied to this process's
environment before Ray or the orchestrator is imported, so every process the run starts
(the driver's Ray, its workers, the persisters) inherits it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    for name, value in spec.get("env", {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    from ._sweep_common import emit_figures as emit

    if spec["system"] in ("ours", "today"):
        from . import _ckpt_bytes_ours

        figures = asyncio.run(_ckpt_bytes_ours.run(spec))
    elif spec["system"] == "tune":
        from . import _ckpt_bytes_tune

        figures = _ckpt_bytes_tune.run(spec)
    else:
        print(f"unknown system {spec['system']!r}; use ours, today or tune", file=sys.stderr)
        return 2
    emit(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
