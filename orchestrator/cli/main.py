"""The command line: ``python -m orchestrator <command> ...``.

Commands
--------
``demo``
    A real small sweep (a NumPy MLP on scikit-learn's digits) on the local Ray, with a
    live table, checkpoints, and one actor killed midway to show recovery.
``run``
    Run any :class:`~orchestrator.Trainable`: an import path, a JSON config or grid,
    stop criteria; prints one line per trial event and a final table.
``resume``
    Continue an experiment (``--storage``, ``--name``) from its journal after its
    driver died: finished trials are kept, the others restart from their newest
    committed checkpoint.
``repair``
    Rebuild a damaged journal (``--storage``, ``--name``) from what survives: the
    head's backup, else the result segments and checkpoints.
``tune``
    Run a Ray Tune script unchanged on trialflow's Ray Tune facade (``orchestrator.tune``).
``ls``, ``show``, ``plot``
    The experiments in a storage, one experiment's trials (and PBT lineage), one
    metric of every trial as a PNG: read from the journals, without Ray or the trials'
    code.
``dashboard``
    A live, read-only web view of the experiments in a storage (trials, curves, config
    against the metric, PBT lineage, scheduler stops), from the same journals.

Every command is a ``(help, configure, handler)`` entry in :data:`COMMANDS`. Bad
arguments are reported before Ray starts, as ``trialflow <command>: error: ...`` with
exit status 2. Otherwise the exit status is 0 when every trial ended TERMINATED (or the
command showed what it was asked for), 1 when one did not (or Ray could not start, or
storage failed), 130 on Ctrl-C.

This module imports only what parsing needs: the handlers import Ray, storage and the
orchestrator, and the demo's trial workers import this package (its model lives here).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from orchestrator.cli import args as cli_args
from orchestrator.cli.args import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from orchestrator.cli.dashboard import configure_dashboard, handle_dashboard
from orchestrator.cli.inspect import (
    configure_ls,
    configure_plot,
    configure_show,
    handle_ls,
    handle_plot,
    handle_show,
)
from orchestrator.cli.repair import configure_repair, handle_repair
from orchestrator.cli.run import configure_resume, configure_run, handle_resume, handle_run
from orchestrator.cli.tune_script import configure_tune, handle_tune
from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "COMMANDS",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "build_parser",
    "main",
]


def _configure_demo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trials", type=cli_args.positive_int, default=8, help="trials (default 8)"
    )
    parser.add_argument(
        "--iterations",
        type=cli_args.positive_int,
        default=30,
        help="iterations per trial (default 30)",
    )
    parser.add_argument(
        "--checkpoint-every",
        type=cli_args.positive_int,
        default=None,
        metavar="N",
        help="checkpoint every N iterations (default: about 6 per trial)",
    )
    parser.add_argument("--no-kill", action="store_true", help="do not kill an actor midway")
    parser.add_argument(
        "--no-live",
        action="store_true",
        help="plain lines instead of a live table (the default without a terminal)",
    )
    cli_args.add_storage_args(parser, default_name="demo-<timestamp>")
    parser.add_argument(
        "--cpu-per-trial",
        type=cli_args.positive_float,
        default=0.25,
        metavar="CPUS",
        help="Ray CPUs per trial (default 0.25: 8 trials share 2 cores)",
    )


def _demo(args: argparse.Namespace, console: Console) -> int:
    from orchestrator.cli.demo import DemoOptions, demo_main  # imports Ray: only for this command

    options = DemoOptions(
        trials=args.trials,
        iterations=args.iterations,
        checkpoint_every=args.checkpoint_every,
        kill=not args.no_kill,
        live=False if args.no_live else None,
        storage=args.storage,
        name=args.name,
        cpu_per_trial=args.cpu_per_trial,
        address=args.address,
    )
    return demo_main(options, console)


Handler = Callable[[argparse.Namespace, "Console"], int]

#: ``name -> (help, configure(parser), handler(args, console) -> exit status)``.
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {
    "demo": (
        "a small real sweep with a live table and a recovered failure",
        _configure_demo,
        _demo,
    ),
    "run": ("run a Trainable over a config or a grid of configs", configure_run, handle_run),
    "resume": (
        "continue an experiment after its driver died (from its journal in storage)",
        configure_resume,
        handle_resume,
    ),
    "repair": (
        "rebuild a damaged experiment journal from what survives (no Ray)",
        configure_repair,
        handle_repair,
    ),
    "tune": (
        "run a Ray Tune script unchanged on trialflow (its ray.tune imports: orchestrator.tune)",
        configure_tune,
        handle_tune,
    ),
    "ls": ("list the experiments in a storage", configure_ls, handle_ls),
    "show": (
        "one experiment's trials (state, config, metric, checkpoints) and PBT lineage",
        configure_show,
        handle_show,
    ),
    "plot": (
        "plot one metric of every trial of an experiment to a PNG",
        configure_plot,
        handle_plot,
    ),
    "dashboard": (
        "a live, read-only web view of the experiments in a storage",
        configure_dashboard,
        handle_dashboard,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m orchestrator",
        description="trialflow: run training trials on Ray.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (help_text, configure, _) in COMMANDS.items():
        configure(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    import faulthandler
    import signal

    from orchestrator.ctrl_c import answer_ctrl_c

    try:
        answer_ctrl_c()  # again, for callers of main() other than python -m orchestrator
    except KeyboardInterrupt:
        print("trialflow: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if hasattr(signal, "SIGUSR1"):  # `kill -USR1 <pid>`: every thread's stack, on stderr
        try:
            faulthandler.register(signal.SIGUSR1, all_threads=True)
        except (AttributeError, OSError, ValueError):  # stderr is no file (captured)
            pass

    parser = build_parser()
    args = parser.parse_args(argv)
    console = _console()
    _configure_logging(verbose=args.verbose)
    _, _, handler = COMMANDS[args.command]
    try:
        return handler(args, console)
    except cli_args.one_line_errors() as err:  # each message says what to do
        print(f"trialflow {args.command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE if isinstance(err, ConfigError) else EXIT_FAILED
    except KeyboardInterrupt as err:
        from orchestrator.api.interrupts import said

        if not said(err):  # else the orchestrator said it all
            print(f"trialflow {args.command}: interrupted", file=sys.stderr)
            hint = getattr(args, "resume_hint", None)
            if hint:
                print(f"continue it with: {hint}", file=sys.stderr)
        return EXIT_INTERRUPTED


def _configure_logging(*, verbose: bool) -> None:
    """Log lines go to stderr, the command's output alone to stdout (so a pipe, as in
    ``... | jq``, or a redirect gets only the output)."""
    from rich.logging import RichHandler

    console = _console(stderr=True)
    handler = RichHandler(console=console, show_path=False, show_time=False, markup=False)
    logging.basicConfig(
        level=logging.WARNING, format="%(name)s: %(message)s", handlers=[handler], force=True
    )
    logging.getLogger("orchestrator").setLevel(logging.INFO if verbose else logging.WARNING)


def _console(*, stderr: bool = False) -> Console:
    from rich.console import Console

    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal:  # a log file: do not squeeze tables into 80 columns
        console = Console(stderr=stderr, highlight=False, width=max(console.width, 130))
    return console
