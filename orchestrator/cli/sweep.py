"""``run --space ...``: a sweep from the command line (``Orchestrator.sweep``).

The JSON form of every domain is :func:`orchestrator.search.space_from_json`'s; the
best trial is printed at the end. ``resume`` continues such a sweep from its journal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.cli import args as cli_args
from orchestrator.cli.args import EXIT_FAILED, EXIT_OK
from orchestrator.core.best import value_of
from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["add_sweep_args", "handle_sweep", "print_best"]


def add_sweep_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "sweeps", "with --space, a sweep: --metric/--mode are its objective too"
    )
    group.add_argument(
        "--space",
        default=None,
        metavar="JSON",
        help='a search space: {"lr": {"loguniform": [1e-4, 0.1]}, "layers": {"choice": '
        '[2, 4]}, "opt": {"grid": ["sgd", "adam"]}, "epochs": 20} (domains: choice, uniform, '
        "loguniform, quniform [low, high, q], randint [low, high), grid; anything else is a "
        "constant; merged over --config)",
    )
    group.add_argument(
        "--num-samples",
        type=cli_args.positive_int,
        default=1,
        metavar="N",
        help="samples of the space (x every grid combination; default 1)",
    )
    from orchestrator.search import searcher_kinds

    searchers = [kind for kind in searcher_kinds() if kind.command_line]
    group.add_argument(
        "--searcher",
        choices=[kind.name for kind in searchers],
        default="random",
        help="how configs are chosen (default random): "
        + "; ".join(f"{kind.name}: {kind.help}" for kind in searchers),
    )
    from orchestrator.schedulers import scheduler_kinds

    kinds = [kind for kind in scheduler_kinds() if kind.command_line]
    with_max_t = "/".join(kind.name for kind in kinds if kind.takes_max_t) or "none"
    group.add_argument(
        "--scheduler",
        choices=[kind.name for kind in kinds],
        default="fifo",
        help="early stopping (default fifo): "
        + "; ".join(f"{kind.name}: {kind.help}" for kind in kinds),
    )
    group.add_argument(
        "--max-t",
        type=cli_args.positive_int,
        default=None,
        metavar="N",
        help=f"for {with_max_t}: the most iterations a trial may run (default: the "
        "training_iteration of --stop, else 100)",
    )
    group.add_argument(
        "--max-concurrent",
        type=cli_args.positive_int,
        default=None,
        metavar="N",
        help="trials at once (default: what the cluster's resources hold)",
    )
    group.add_argument("--seed", type=int, default=None, help="seed of the searcher")
    group.add_argument(
        "--no-reuse-actors",
        dest="reuse_actors",
        action="store_false",
        help="give every trial a new worker process",
    )


def handle_sweep(
    args: argparse.Namespace, console: Console, trainable: Any, base: dict[str, Any]
) -> int:
    from orchestrator.core.machine import TrialState
    from orchestrator.search import searcher_kind, space_from_json

    if args.grid is not None:
        raise ConfigError('--grid and --space: put the grid in --space as {"key": {"grid": [...]}}')
    raw = cli_args.json_arg(args.space, "--space")
    if not isinstance(raw, dict):
        raise ConfigError(f"--space must be a JSON object, got {args.space!r}")
    space = {**base, **space_from_json(raw)}
    stop = cli_args.parse_stop(args.stop) if args.stop else None
    metric = args.metric
    mode = args.mode if metric else None
    scheduler = _scheduler(args, stop)
    if scheduler is None and stop is None:
        raise ConfigError(
            "give at least one --stop METRIC=VALUE (e.g. --stop training_iteration=10), "
            "or the trials would run forever"
        )
    searcher = searcher_kind(args.searcher).cls(seed=args.seed)  # type: ignore[call-arg]
    from orchestrator.cli.common import report_trials

    orch = cli_args.orchestrator_from(args, console, default_name="run")
    console.print(
        f"sweep of {trainable.__name__}: {args.num_samples} sample(s); experiment "
        f"{orch.storage_uri}",
        highlight=False,
        soft_wrap=True,
    )

    async def main() -> Any:
        async with orch:
            return await orch.sweep(
                trainable,
                space,
                num_samples=args.num_samples,
                metric=metric,
                mode=mode,
                searcher=searcher,
                scheduler=scheduler,
                max_concurrent_trials=args.max_concurrent,
                stop=stop,
                checkpoint_every=args.checkpoint_every,
                resources={"cpu": args.cpu, **({"gpu": args.gpu} if args.gpu else {})},
                seed=args.seed,
                reuse_actors=args.reuse_actors,
            )

    result = asyncio.run(main())  # Ray starts on entering, after storage is checked
    done = report_trials(result.trials, args, console)
    print_best(result, console)
    errored = [t for t in result.trials if t.state is TrialState.ERROR]
    for trial in errored:
        console.print(f"{trial.id}: ERROR: {trial.error}", style="red", highlight=False)
    finished = done + sum(1 for t in result.trials if t.state is TrialState.PAUSED)
    return EXIT_OK if not errored and finished == len(result.trials) else EXIT_FAILED


def _scheduler(args: argparse.Namespace, stop: Mapping[str, float] | None) -> Any:
    from orchestrator.schedulers import FIFO, scheduler_kind

    kind = scheduler_kind(args.scheduler)
    if kind.cls is FIFO:
        return None
    if kind.cls.needs_objective and not args.metric:
        raise ConfigError(f"--scheduler {args.scheduler} needs --metric (and --mode)")
    if not kind.takes_max_t:
        return kind.cls()
    limit = (stop or {}).get("training_iteration")
    return kind.cls(max_t=args.max_t or (int(limit) if limit else 100))  # type: ignore[call-arg]


def print_best(result: Any, console: Console) -> None:
    if result.metric is None:
        return
    try:
        best = result.best_trial
    except ConfigError as err:
        console.print(f"no best trial: {err}", style="red", highlight=False)
        return
    value = value_of(best.results, result.metric)
    console.print(
        f"best trial {best.id}: {result.metric}={value} ({result.mode}) config "
        f"{json.dumps(best.config, default=str)}",
        highlight=False,
        soft_wrap=True,
    )
