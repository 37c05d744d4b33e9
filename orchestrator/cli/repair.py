"""``repair``: rebuild a damaged experiment journal from what survives.

Reads and writes the experiment's storage only (no Ray, no trials' code), under the
experiment's lease (refused while a driver holds it; ``--take-over`` takes it); see
:mod:`orchestrator.journal.repair` for what it takes from where. Prints each damaged
object and what it held, which results came from where, every result it could not
save, and how to continue.

Exit status: 0 when every result that any object still held is in the repaired
journal (or nothing was damaged); 1 when some are lost (the report says which, and the
journal is repaired all the same), or when a driver holds the experiment's lease; 2
when nothing of an experiment is at the path (or several are: a storage root). A trial
that lost only its spec with the head is not a loss: its results and checkpoints are
kept, and the resumed script's ``add_trial`` supplies the spec.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
from typing import TYPE_CHECKING

from orchestrator.cli import args as cli_args
from orchestrator.cli.args import EXIT_FAILED, EXIT_OK
from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.journal.repair import RepairReport

__all__ = ["configure_repair", "handle_repair"]


def configure_repair(parser: argparse.ArgumentParser) -> None:
    cli_args.add_storage_args(parser, default_name="required", ray=False, name_required=True)
    cli_args.add_storage_option_arg(parser)
    parser.add_argument(
        "--take-over",
        action="store_true",
        help="repair even though a driver holds the experiment's lease: for a driver "
        "that is gone (its machine died, say); one that still runs stops at its next "
        "lease renewal, and a journal write of its before then replaces the repair",
    )


def handle_repair(args: argparse.Namespace, console: Console) -> int:
    import storage
    from orchestrator.api.repair import repair

    options = cli_args.storage_options(args.storage_option)
    uri = cli_args.experiment_uri(args.storage, args.name)
    try:
        report = asyncio.run(
            repair(args.storage, args.name, storage_options=options, take_over=args.take_over)
        )
    except storage.BucketNotFound as err:
        raise ConfigError(f"no experiment at {uri} ({err}); check --storage and --name") from err
    except (storage.UnsupportedURI, storage.MissingDriver) as err:
        raise ConfigError(f"cannot open {uri}: {err}; check --storage") from err
    for line in describe(report, args):
        console.print(line, highlight=False, soft_wrap=True)
    return EXIT_OK if report.complete else EXIT_FAILED


def describe(report: RepairReport, args: argparse.Namespace) -> list[str]:
    """What ``repair`` prints: what was wrong, what it did, the way on."""
    lines = report.lines()
    if report.action == "intact":
        return lines
    storage_arg = f" --storage {shlex.quote(args.storage)}" if args.storage else ""
    options = "".join(f" --storage-option {shlex.quote(o)}" for o in args.storage_option)
    lines.append(
        f"continue with: python -m orchestrator resume{storage_arg} --name "
        f"{shlex.quote(args.name)}{options} (or Orchestrator(..., resume=True)); look with "
        f"python -m orchestrator show{storage_arg} --name {shlex.quote(args.name)}{options}"
    )
    return lines
