"""``python -m orchestrator tune SCRIPT [ARGS...]``: run a Ray Tune script, unchanged, on
trialflow's facade: its ``ray.tune`` imports resolve to ``orchestrator.tune``
(:mod:`orchestrator.tune.alias`), everything else (``import ray``, ``ray.init``) stays
Ray's. The exit status is the script's."""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from typing import Any

__all__ = ["configure_tune", "handle_tune"]


def configure_tune(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("script", help="a Python script written for Ray Tune")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")


def handle_tune(args: argparse.Namespace, console: Any) -> int:
    from orchestrator.errors import ConfigError
    from orchestrator.tune.alias import install

    script = os.path.abspath(args.script)
    if not os.path.isfile(script):
        raise ConfigError(f"no such script: {args.script}")
    install()
    sys.argv = [script, *args.args]
    sys.path.insert(0, os.path.dirname(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0
