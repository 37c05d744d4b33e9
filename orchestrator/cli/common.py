"""What the command line's commands share: connecting to Ray for one command, the final
table, and the exact command that resumes an experiment."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from orchestrator.cli.present import results_table
from orchestrator.engine.raystart import ensure_ray

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.api.orchestrator import Orchestrator
    from orchestrator.api.trial import Trial

__all__ = ["add_table_args", "ray_session", "report_trials", "resume_command"]


def resume_command(orch: Orchestrator) -> str:
    """The exact command that continues ``orch``'s experiment (the same line an
    interrupted ``async with Orchestrator`` prints: ``orchestrator.api.interrupts``)."""
    from orchestrator.api.interrupts import resume_command as command_for

    return command_for(orch.storage_uri)


@contextlib.contextmanager
def ray_session(address: str | None, env: Mapping[str, str] | None = None) -> Iterator[None]:
    """Connect to Ray for one command (see :func:`orchestrator.engine.raystart.ensure_ray`);
    shut it down afterwards if this started it."""
    owned = ensure_ray(address, env=env)
    try:
        yield
    finally:
        if owned:
            import ray

            ray.shutdown()


def add_table_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metric", default=None, help="sort the final table by this metric (last result)"
    )
    parser.add_argument(
        "--mode", choices=("max", "min"), default="max", help="with --metric (default max)"
    )


def report_trials(trials: Sequence[Trial], args: argparse.Namespace, console: Console) -> int:
    """Print the final table and how many trials finished; that number."""
    from orchestrator.core.machine import TrialState

    console.print(results_table(trials, args.metric, args.mode))
    done = sum(1 for t in trials if t.state is TrialState.TERMINATED)
    console.print(f"{done}/{len(trials)} trials TERMINATED", highlight=False)
    return done
