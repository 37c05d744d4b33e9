"""``ls``, ``show`` and ``plot``: look at experiments in storage, from their journals.

These read any storage the orchestrator writes to (a path, ``s3://``, ``gs://``; driver
options with ``--storage-option``), never start Ray, and never import or unpickle the
trials' code (see :mod:`orchestrator.views.experiments`), so they work on a machine that has only
the results. A missing storage or experiment and an unknown metric are usage errors
(exit status 2) that say what was looked for; a journal that cannot be read is exit
status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from orchestrator.cli import args as cli_args
from orchestrator.cli.args import EXIT_FAILED, EXIT_OK
from orchestrator.cli.present import TrialRow, cell, states_text, time_text, trials_table
from orchestrator.errors import ConfigError, JournalError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from orchestrator.views.experiments import ExperimentRecord, ExperimentSummary

__all__ = [
    "configure_ls",
    "configure_plot",
    "configure_show",
    "handle_ls",
    "handle_plot",
    "handle_show",
]

T = TypeVar("T")


# -------------------------------------------------------------------------------- ls


def configure_ls(parser: argparse.ArgumentParser) -> None:
    cli_args.add_storage_args(parser, default_name=None, ray=False)
    cli_args.add_storage_option_arg(parser)


def handle_ls(args: argparse.Namespace, console: Console) -> int:
    from orchestrator.views.experiments import list_experiments

    root = cli_args.results_root(args.storage)
    options = cli_args.storage_options(args.storage_option)
    found = _run(args, lambda: list_experiments(root, **options), missing=root)
    if found is None:
        return EXIT_FAILED
    if not found:
        console.print(f"no experiments in {root}", highlight=False, soft_wrap=True)
        return EXIT_OK
    # The root on a line of its own: as a table's title it would wrap to the table's width.
    console.print(f"{len(found)} experiment(s) in {root}", highlight=False, soft_wrap=True)
    console.print(experiments_table(found))
    damaged = [s for s in found if s.damaged]
    if damaged:
        from orchestrator.journal.damage import repair_command

        console.print(
            f"{len(damaged)} damaged journal(s): recover what survives with "
            + "; ".join(f"`{repair_command(s.uri)}`" for s in damaged),
            highlight=False,
            soft_wrap=True,
            style="red",
        )
    return EXIT_OK


def experiments_table(found: list[ExperimentSummary]) -> Table:
    """One row per experiment; a "best" column only when some experiment has a sweep
    that names its metric."""
    from rich.markup import escape
    from rich.table import Table

    with_best = any(s.metric is not None for s in found)
    table = Table(header_style="bold")
    for column in ("experiment", "trials", *(["best"] if with_best else []), "started", "updated"):
        table.add_column(column)
    for summary in found:
        trials = states_text(summary.trials_by_state) or "no trials"
        table.add_row(
            summary.name,
            f"[red]DAMAGED: {escape(summary.damaged)}[/red]" if summary.damaged else trials,
            *([_best_text(summary)] if with_best else []),
            time_text(summary.started_at),
            time_text(summary.written_at),
        )
    return table


def _best_text(summary: ExperimentSummary) -> str:
    if summary.metric is None:
        return "-"
    if summary.best is None:
        return f"{summary.metric}: none yet"
    trial_id, value = summary.best
    return f"{summary.metric}={cell(value)} ({summary.mode}, {trial_id})"


# ------------------------------------------------------------------------------ show


def configure_show(parser: argparse.ArgumentParser) -> None:
    cli_args.add_storage_args(parser, default_name="required", ray=False, name_required=True)
    cli_args.add_storage_option_arg(parser)
    parser.add_argument(
        "--metric",
        default=None,
        help="the metric to show and sort by, best first (default: the sweep's metric, "
        "if the experiment had one); a nested one as a/b",
    )
    parser.add_argument(
        "--mode",
        choices=("max", "min"),
        default=None,
        help="with --metric (default: the sweep's mode for its metric, else max)",
    )


def handle_show(args: argparse.Namespace, console: Console) -> int:
    record = _experiment(args)
    if record is None:
        return EXIT_FAILED
    metric, mode = _objective(record, args.metric, args.mode, required=args.metric is not None)
    counts: dict[str, int] = {}
    for trial in record.trials:
        counts[trial.state] = counts.get(trial.state, 0) + 1
    states = states_text(counts)
    console.print(
        f"experiment {record.name} at {record.uri}: {len(record.trials)} trial(s) "
        f"({states or 'none'}); started {time_text(record.started_at)}, last update "
        f"{time_text(record.written_at)}",
        highlight=False,
        soft_wrap=True,
    )
    rows = [
        TrialRow(
            t.id,
            t.config if t.config_now is None else t.config_now,  # what it ended with
            t.state,
            t.iteration,
            t.num_failures,
            t.last_result,
            extra={"ckpts": str(len(t.checkpoints))},
            results=t.results,
        )
        for t in record.trials
    ]
    title = "trials" + (f", best {metric} ({mode}) first" if metric else "")
    console.print(trials_table(rows, metric, mode, title=title, finished=False))
    for trial in record.trials:
        if trial.state == "ERROR" and trial.error:
            error = trial.error.removeprefix(f"trial {trial.id}: ")
            console.print(f"{trial.id}: ERROR: {error}", style="red", highlight=False)
    exploits = [e for s in record.sweeps for e in s.get("lineage") or [] if isinstance(e, dict)]
    if exploits:
        console.print(lineage_table(exploits))
    return EXIT_OK


def lineage_table(exploits: list[dict[str, Any]]) -> Table:
    """One row per PBT exploit: who copied whom, from which checkpoint, what changed."""
    from rich.table import Table

    table = Table(title="PBT exploits", title_justify="left", header_style="bold")
    for column in ("trial", "at", "donor", "donor ckpt", "changed"):
        table.add_column(column, justify="right" if column in ("at", "donor ckpt") else "left")
    for exploit in exploits:
        table.add_row(
            str(exploit.get("trial_id", "?")),
            cell(exploit.get("time")),
            str(exploit.get("donor_id", "?")),
            cell(exploit.get("donor_checkpoint_iteration")),
            config_changes(exploit.get("old_config") or {}, exploit.get("new_config") or {}),
        )
    return table


def config_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """``key: old -> new`` for each key whose value differs (``-``: absent), or "-"."""
    missing = object()
    changed = []
    for key in dict.fromkeys([*old, *new]):
        before, after = old.get(key, missing), new.get(key, missing)
        if before != after:
            shown = ["-" if v is missing else json.dumps(v, default=str) for v in (before, after)]
            changed.append(f"{key}: {shown[0]} -> {shown[1]}")
    return ", ".join(changed) or "-"


# ------------------------------------------------------------------------------ plot


def configure_plot(parser: argparse.ArgumentParser) -> None:
    cli_args.add_storage_args(parser, default_name="required", ray=False, name_required=True)
    cli_args.add_storage_option_arg(parser)
    parser.add_argument("--metric", required=True, help="the metric to plot; a nested one as a/b")
    parser.add_argument(
        "--mode",
        choices=("max", "min"),
        default=None,
        help="which is best (default: the sweep's mode for this metric, else max)",
    )
    parser.add_argument(
        "-o",
        "--output",
        default=None,
        metavar="PNG",
        help="where to write the picture (default <name>-<metric>.png here)",
    )


def handle_plot(args: argparse.Namespace, console: Console) -> int:
    from orchestrator.views.plotting import plot_metric

    path = os.path.abspath(args.output or _file_name(f"{args.name}-{args.metric}") + ".png")
    if not os.path.isdir(os.path.dirname(path)):
        raise ConfigError(f"cannot write {path}: its directory does not exist")
    record = _experiment(args)
    if record is None:
        return EXIT_FAILED
    metric: str = args.metric
    _, mode = _objective(record, metric, args.mode, required=True)
    trials = [
        {"id": t.id, "results": t.results, "state": t.state, "events": t.events}
        for t in record.trials
    ]
    plot_metric(trials, metric, mode, path=path)
    console.print(f"wrote {path}", highlight=False, soft_wrap=True)
    return EXIT_OK


def _file_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.=" else "_" for c in text)


# --------------------------------------------------------------------------- helpers


def _experiment(args: argparse.Namespace) -> ExperimentRecord | None:
    """The experiment ``--storage``/``--name`` name; ConfigError when there is none
    (None when its journal cannot be read, which has been reported)."""
    from orchestrator.core.journal_format import JOURNAL_KEY

    uri = cli_args.experiment_uri(args.storage, args.name)
    options = cli_args.storage_options(args.storage_option)
    found = _run(args, lambda: _read(uri, options), missing=uri)
    if found is None:
        return None
    record, exists = found
    if not exists or record is None:
        raise ConfigError(
            f"no experiment at {uri} (no {JOURNAL_KEY}); check --storage and --name "
            "(`python -m orchestrator ls --storage ...` lists the experiments there)"
        )
    return record


async def _read(uri: str, options: Mapping[str, Any]) -> tuple[ExperimentRecord | None, bool]:
    """The record at ``uri``, and False when a local experiment's directory is missing."""
    import storage
    from orchestrator.views.experiments import read_experiment

    store = storage.open_storage(uri, **options)
    try:
        try:
            await store.open()
        except storage.BucketNotFound:
            if isinstance(store, storage.LocalStorage):  # no directory: no experiment
                return None, False
            raise
        return await read_experiment(store), True
    finally:
        await store.aclose()


def _run(args: argparse.Namespace, job: Callable[[], Awaitable[T]], *, missing: str) -> T | None:
    """Run ``job`` with storage errors the user can fix as ConfigError; a journal that
    cannot be read is reported here (None)."""
    import storage

    async def main() -> T:
        return await job()

    try:
        return asyncio.run(main())
    except storage.BucketNotFound as err:
        if "://" not in missing:  # the driver's words would suggest create=True
            raise ConfigError(f"no directory {missing}; check --storage") from err
        raise ConfigError(f"cannot read {missing}: {err}; check --storage") from err
    except (storage.UnsupportedURI, storage.MissingDriver) as err:
        raise ConfigError(f"cannot read {missing}: {err}; check --storage") from err
    except JournalError as err:
        print(f"trialflow {args.command}: error: {err}", file=sys.stderr)
        return None


def _objective(
    record: ExperimentRecord, metric: str | None, mode: str | None, *, required: bool
) -> tuple[str | None, str]:
    """The metric and mode to rank by: those given, else the sweep's. With
    ``required``, a metric that no trial reported is a ConfigError naming the keys the
    trials did report."""
    objective = record.objective()
    if metric is None and objective is not None:
        metric = objective[0]
    if mode is None:
        mode = objective[1] if objective is not None and objective[0] == metric else "max"
    if required and metric is not None and not _reported(record, metric):
        keys = record.metric_keys()
        named = ", ".join(keys[:40]) + (", ..." if len(keys) > 40 else "")
        raise ConfigError(
            f"no trial of {record.name} reported the metric {metric!r}; the trials "
            f"reported: {named or 'nothing'}"
        )
    return metric, mode


def _reported(record: ExperimentRecord, metric: str) -> bool:
    from orchestrator.core.best import metric_value

    return any(metric_value(r, metric) is not None for t in record.trials for r in t.results)
