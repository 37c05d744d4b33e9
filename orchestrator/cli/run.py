"""``run`` and ``resume``: train on Ray, one line per trial event, a table at the end.

Everything that can be wrong with the arguments is checked before Ray starts (the
``Orchestrator`` constructor validates its options without connecting). The driver's
machinery is imported by the handlers, not by this module, which the parser imports.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import itertools
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.cli import args as cli_args
from orchestrator.cli.args import EXIT_FAILED, EXIT_OK
from orchestrator.cli.common import add_table_args, report_trials, resume_command
from orchestrator.cli.present import EventPrinter
from orchestrator.cli.sweep import add_sweep_args, handle_sweep, print_best
from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.actor.trainable import Trainable
    from orchestrator.api.trial import Trial

__all__ = [
    "configure_resume",
    "configure_run",
    "expand_grid",
    "handle_resume",
    "handle_run",
    "load_trainable",
]


def configure_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "trainable",
        metavar="MODULE:NAME",
        help="import path of a Trainable subclass or a training function, e.g. "
        "mypkg.train:MyTrainable or mypkg.train:train",
    )
    parser.add_argument(
        "--config", default="{}", metavar="JSON", help="the config, a JSON object (default {})"
    )
    parser.add_argument(
        "--grid",
        default=None,
        metavar="JSON",
        help='configs to try: {"lr": [0.1, 0.01], ...} (every combination, merged into '
        "--config) or a JSON list of config objects",
    )
    parser.add_argument(
        "--trials",
        type=cli_args.positive_int,
        default=1,
        metavar="N",
        help="trials per config (default 1)",
    )
    parser.add_argument(
        "--stop",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="stop once METRIC >= VALUE, e.g. training_iteration=10 (repeatable; any one "
        "suffices; at least one is required)",
    )
    parser.add_argument(
        "--checkpoint-every",
        type=cli_args.non_negative_int,
        default=0,
        metavar="N",
        help="checkpoint every N iterations (default 0: never)",
    )
    parser.add_argument(
        "--cpu",
        type=cli_args.non_negative_float,
        default=1.0,
        help="Ray CPUs per trial (default 1)",
    )
    parser.add_argument(
        "--gpu", type=cli_args.non_negative_float, default=0.0, help="GPUs per trial (default 0)"
    )
    add_table_args(parser)
    add_sweep_args(parser)
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="delete an existing experiment of that --name first (else it is an error)",
    )
    cli_args.add_trial_args(parser)
    cli_args.add_orchestrator_args(parser)
    cli_args.add_storage_args(parser, default_name="run-<timestamp>")


def handle_run(args: argparse.Namespace, console: Console) -> int:
    from orchestrator.core.machine import TrialState

    trainable = load_trainable(args.trainable)
    base = cli_args.json_arg(args.config, "--config")
    if not isinstance(base, dict):
        raise ConfigError(f"--config must be a JSON object, got {args.config!r}")
    if args.space is not None:
        return handle_sweep(args, console, trainable, base)
    grid = None if args.grid is None else cli_args.json_arg(args.grid, "--grid")
    configs = expand_grid(base, grid)
    if not args.stop:
        raise ConfigError(
            "give at least one --stop METRIC=VALUE (e.g. --stop training_iteration=10), "
            "or the trials would run forever"
        )
    stop = cli_args.parse_stop(args.stop)
    orch = cli_args.orchestrator_from(args, console, default_name="run")
    trials = [
        orch.add_trial(
            trainable,
            config,
            stop=stop,
            checkpoint_every=args.checkpoint_every,
            resources={"cpu": args.cpu, **({"gpu": args.gpu} if args.gpu else {})},
        )
        for config in configs
        for _ in range(args.trials)
    ]
    console.print(
        f"{len(trials)} trial(s) of {trainable.__name__}; experiment {orch.storage_uri}",
        highlight=False,
        soft_wrap=True,
    )

    async def main() -> None:
        async with orch:
            await orch.run()

    asyncio.run(main())  # Ray starts on entering, after storage is checked
    done = report_trials(trials, args, console)
    for trial in trials:
        if trial.state is TrialState.ERROR:
            console.print(f"{trial.id}: ERROR: {trial.error}", style="red", highlight=False)
    return EXIT_OK if done == len(trials) else EXIT_FAILED


def configure_resume(parser: argparse.ArgumentParser) -> None:
    cli_args.add_storage_args(parser, default_name="required")
    parser.add_argument(
        "--resume-errored", action="store_true", help="also retry trials that ended in ERROR"
    )
    cli_args.add_orchestrator_args(parser)
    add_table_args(parser)


def handle_resume(args: argparse.Namespace, console: Console) -> int:
    from orchestrator.api.orchestrator import Orchestrator

    if not args.name:
        raise ConfigError("resume needs --name: the experiment to continue")
    _require_journal(Orchestrator(storage=args.storage, name=args.name).storage_uri)
    orch = Orchestrator(
        storage=args.storage,
        name=args.name,
        hooks=[EventPrinter(console)],
        resume=True,
        resume_errored=args.resume_errored,
        ray_address=args.address,
        **cli_args.orchestrator_options(args),
    )
    args.resume_hint = resume_command(orch)

    async def main() -> list[Trial]:
        from orchestrator.core.codec import unpickle_b64

        async with orch:
            if not orch.trials:
                return []
            counts: dict[str, int] = {}
            for trial in orch.trials:
                counts[trial.state.value] = counts.get(trial.state.value, 0) + 1
            summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
            console.print(f"resuming {orch.storage_uri}: {summary}", highlight=False)
            for doc in list(orch._exp.journaled_sweeps.values()):
                if doc.get("finished") or not doc.get("call"):
                    continue
                try:
                    call = unpickle_b64(doc["call"])
                except Exception as err:
                    raise ConfigError(
                        f"sweep {doc.get('name')!r}: cannot load its code to resume it "
                        f"({type(err).__name__}: {err}); run from the directory that holds "
                        "its module, or add that directory to PYTHONPATH"
                    ) from err
                console.print(f"continuing sweep {doc['name']!r}", highlight=False)
                result = await orch.sweep(**call)
                print_best(result, console)
            return await orch.run()

    trials = asyncio.run(main())  # Ray starts on entering, after the journal is read
    if not trials:
        raise ConfigError(
            f"no experiment journal at {orch.storage_uri}; check --storage and --name"
        )
    done = report_trials(trials, args, console)
    return EXIT_OK if done == len(trials) else EXIT_FAILED


def load_trainable(spec: str) -> type[Trainable]:
    """Import ``module:Class`` (or ``module.Class``) and check it is a Trainable."""
    from orchestrator.actor.trainable import is_trainable_class

    module_name, sep, attr = spec.partition(":")
    if not sep:
        module_name, _, attr = spec.rpartition(".")
    if not module_name or not attr:
        raise ConfigError(
            f"trainable {spec!r}: expected an import path like mypkg.train:MyTrainable"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(
            f"trainable {spec!r}: cannot import module {module_name!r} ({err}); run from "
            "the directory that holds it or add that directory to PYTHONPATH"
        ) from err
    obj = getattr(module, attr, None)
    if obj is None:
        raise ConfigError(f"trainable {spec!r}: module {module_name!r} has no {attr!r}")
    from orchestrator.actor.function import is_function

    if not is_trainable_class(obj) and not is_function(obj):
        raise ConfigError(
            f"trainable {spec!r}: {attr} is neither a subclass of orchestrator.Trainable nor "
            "a training function"
        )
    return obj  # type: ignore[no-any-return]


def expand_grid(base: Mapping[str, Any], grid: Any) -> list[dict[str, Any]]:
    """The configs to run: ``base`` alone, ``base`` merged with every combination of a
    ``{key: [values]}`` grid, or ``base`` merged with each config of a list."""
    if grid is None:
        return [dict(base)]
    if isinstance(grid, list):
        if not grid or not all(isinstance(c, dict) for c in grid):
            raise ConfigError("--grid as a list must be a non-empty list of JSON objects")
        return [{**base, **c} for c in grid]
    if isinstance(grid, dict):
        if not grid:
            raise ConfigError("--grid must not be empty")
        for key, values in grid.items():
            if not isinstance(values, list) or not values:
                raise ConfigError(
                    f"--grid: {key!r} must map to a non-empty list of values, got "
                    f"{json.dumps(values)}"
                )
        keys = list(grid)
        return [
            {**base, **dict(zip(keys, combo, strict=True))}
            for combo in itertools.product(*(grid[k] for k in keys))
        ]
    raise ConfigError("--grid must be a JSON object of lists or a JSON list of objects")


def _require_journal(uri: str) -> None:
    """Fail before Ray starts when there is nothing to resume at ``uri``."""
    import storage as storage_pkg
    from orchestrator.core.journal_format import BACKUP_KEY, JOURNAL_KEY

    async def exists() -> bool:
        try:
            async with storage_pkg.open_storage(uri) as store:  # a damaged head: its backup
                return any([await store.exists(k) for k in (JOURNAL_KEY, BACKUP_KEY)])
        except storage_pkg.StorageError:
            return False

    if not asyncio.run(exists()):
        raise ConfigError(f"no experiment journal at {uri}; check --storage and --name")
