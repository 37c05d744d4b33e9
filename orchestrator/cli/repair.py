"""``repair``: rebuild a damaged experiment journal from what survives.

Reads and writes the experiment's storage only (no Ray, no trials' code); see
:mod:`orchestrator.journal.repair` for what it takes from where. Prints what was damaged, what
it did, and how to continue.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
from typing import TYPE_CHECKING

from orchestrator.cli import args as cli_args
from orchestrator.cli.args import EXIT_OK
from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.journal.repair import RepairReport

__all__ = ["configure_repair", "handle_repair"]


def configure_repair(parser: argparse.ArgumentParser) -> None:
    cli_args.add_storage_args(parser, default_name="required", ray=False, name_required=True)
    cli_args.add_storage_option_arg(parser)


def handle_repair(args: argparse.Namespace, console: Console) -> int:
    import storage
    from orchestrator.journal.repair import repair_experiment

    uri = cli_args.experiment_uri(args.storage, args.name)
    options = cli_args.storage_options(args.storage_option)

    async def main() -> RepairReport:
        store = storage.open_storage(uri, **options)
        try:
            await store.open()
            return await repair_experiment(store)
        finally:
            await store.aclose()

    try:
        report = asyncio.run(main())
    except storage.BucketNotFound as err:
        raise ConfigError(f"no experiment at {uri} ({err}); check --storage and --name") from err
    except (storage.UnsupportedURI, storage.MissingDriver) as err:
        raise ConfigError(f"cannot open {uri}: {err}; check --storage") from err
    for line in describe(report, args):
        console.print(line, highlight=False, soft_wrap=True)
    return EXIT_OK


def describe(report: RepairReport, args: argparse.Namespace) -> list[str]:
    """What ``repair`` prints: what was wrong, what it did, the way on."""
    if report.action == "intact":
        return [
            f"the journal at {report.uri} reads whole ({report.trials} trial(s)): nothing to do"
        ]
    lines = [f"damaged: {report.problem}"]
    if report.action == "backup":
        lines.append(
            f"restored the head from its backup (the journal's last write): {report.trials} "
            "trial(s)"
        )
    else:
        lines.append(
            f"rebuilt the journal from what survives: {report.trials} trial(s), "
            f"{report.whole} whole from the damaged head or its backup, {report.results} "
            f"result(s) from {report.segments} segment(s)"
        )
        if report.spec_lost:
            shown = ", ".join(report.spec_lost)
            lines.append(
                f"{len(report.spec_lost)} trial(s) lost their spec with the head (now ERROR, "
                f"their results and checkpoints kept): {shown}; under resume=True, the "
                "add_trial call of each one's trainable and config (or one with "
                "trial_id=<its id>) continues it from its newest checkpoint"
            )
    if report.kept_aside:
        lines.append(f"the damaged head is kept as {report.kept_aside}")
    storage_arg = f" --storage {shlex.quote(args.storage)}" if args.storage else ""
    options = "".join(f" --storage-option {shlex.quote(o)}" for o in args.storage_option)
    lines.append(
        f"continue with: python -m orchestrator resume{storage_arg} --name "
        f"{shlex.quote(args.name)}{options} (or Orchestrator(..., resume=True)); look with "
        f"python -m orchestrator show{storage_arg} --name {shlex.quote(args.name)}{options}"
    )
    return lines
