"""Run one ``bench_train`` sweep under one system, in this (fresh) process; print its
figures.

``python -m benchmarks._train_child '<spec as JSON>'`` (``spec["system"]``: ``ours`` or
``tune``); ``bench_train`` starts one of these per run.
"""

from __future__ import annotations

import asyncio
import json
import sys

from ._sweep_common import emit_figures


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    # Ray's, Train's and torch's imports out of both systems' clocks.
    import ray  # noqa: F401
    import ray.train.torch  # noqa: F401
    import torch  # noqa: F401

    if spec["system"] == "ours":
        from . import _train_ours

        figures = asyncio.run(_train_ours.run(spec))
    elif spec["system"] == "tune":
        from . import _train_tune

        figures = _train_tune.run(spec)
    else:
        print(f"unknown system {spec['system']!r}; use ours or tune", file=sys.stderr)
        return 2
    emit_figures(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
