"""``python -m orchestrator tune SCRIPT [ARGS...]``: run a Ray Tune script, unchanged, on
trialflow's facade: its ``ray.tune`` imports resolve to ``orchestrator.tune``
(:mod:`orchestrator.tune.alias`), everything else (``import ray``, ``ray.init``) stays
Ray's. The exit status is the script's.

The script fails as it would under ``python script.py``: a syntax error shows the file,
line and caret, an exception the script's frames (from its own ``<module>`` on), each
through ``sys.excepthook``, exit status 1, none of this command's frames. Our own errors
that :func:`orchestrator.cli.main.main` answers in one line (a Tune option the facade
refuses, a storage that cannot be reached...) still are."""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from types import TracebackType
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
    except Exception as err:
        if _ours(err):
            raise
        tb = _from_script(err.__traceback__, script)
        if tb is None and not (isinstance(err, SyntaxError) and err.filename == script):
            raise  # it failed before the script ran: ours to show
        # The hook shows the traceback the exception holds: cut ours off it first.
        sys.excepthook(type(err), err.with_traceback(tb), tb)
        return 1
    return 0


def _from_script(tb: TracebackType | None, script: str) -> TracebackType | None:
    """``tb`` from the script's first frame on (None when the script never ran)."""
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    return tb


def _ours(err: BaseException) -> bool:
    """One of the errors the command line answers in one line."""
    from orchestrator.cli.args import one_line_errors

    return isinstance(err, one_line_errors())
