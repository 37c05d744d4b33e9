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

Every command is a ``(configure, handler)`` pair in :data:`COMMANDS`. Bad arguments are
reported before Ray starts, as ``trialflow <command>: error: ...`` with exit status 2.
Otherwise the exit status is 0 when every trial ended TERMINATED, 1 when one did not
(or Ray could not start), 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import itertools
import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from storage import StorageError

from .errors import ConfigError, OrchestratorError
from .lifecycle import TrialState
from .orchestrator import Orchestrator
from .trainable import Trainable, is_trainable_class
from .trial import Trial

__all__ = ["COMMANDS", "build_parser", "load_trainable", "main", "ray_session"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

log = logging.getLogger("orchestrator.cli")

#: Result keys the orchestrator adds; not worth a column.
_BOOKKEEPING = {"training_iteration", "trial_id", "time_this_iter_s"}


# ------------------------------------------------------------------------------ demo


def _configure_demo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trials", type=_positive_int, default=8, help="trials (default 8)")
    parser.add_argument(
        "--iterations", type=_positive_int, default=30, help="iterations per trial (default 30)"
    )
    parser.add_argument(
        "--checkpoint-every",
        type=_positive_int,
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
    _add_storage_args(parser, default_name="demo-<timestamp>")
    parser.add_argument(
        "--cpu-per-trial",
        type=_positive_float,
        default=0.25,
        metavar="CPUS",
        help="Ray CPUs per trial (default 0.25: 8 trials share 2 cores)",
    )


def _demo(args: argparse.Namespace, console: Console) -> int:
    from .demo import DemoOptions, demo_main

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


# ------------------------------------------------------------------------------- run


def _configure_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "trainable",
        metavar="MODULE:CLASS",
        help="import path of a Trainable subclass, e.g. mypkg.train:MyTrainable",
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
        "--trials", type=_positive_int, default=1, metavar="N", help="trials per config (default 1)"
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
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="checkpoint every N iterations (default 0: never)",
    )
    parser.add_argument(
        "--cpu", type=_non_negative_float, default=1.0, help="Ray CPUs per trial (default 1)"
    )
    parser.add_argument(
        "--gpu", type=_non_negative_float, default=0.0, help="GPUs per trial (default 0)"
    )
    parser.add_argument(
        "--metric", default=None, help="sort the final table by this metric (last result)"
    )
    parser.add_argument(
        "--mode", choices=("max", "min"), default="max", help="with --metric (default max)"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="delete an existing experiment of that --name first (else it is an error)",
    )
    _add_trial_args(parser)
    _add_orchestrator_args(parser)
    _add_storage_args(parser, default_name="run-<timestamp>")


def _add_trial_args(parser: argparse.ArgumentParser) -> None:
    """The per-trial options of ``add_trial`` (and their experiment-wide defaults)."""
    parser.add_argument(
        "--max-failures",
        type=int,
        default=0,
        metavar="N",
        help="failures a trial recovers from before ERROR (-1: no limit; default 0)",
    )
    parser.add_argument(
        "--keep-checkpoints",
        type=_positive_int,
        default=None,
        metavar="N",
        help="keep the N newest checkpoints (or the N best with --checkpoint-score) and "
        "the newest; default: keep all",
    )
    parser.add_argument(
        "--checkpoint-score",
        type=_score,
        default=None,
        metavar="METRIC:max|min",
        help="with --keep-checkpoints: keep the best by this metric, e.g. loss:min",
    )
    parser.add_argument(
        "--result-buffer",
        type=_positive_int,
        default=1,
        metavar="N",
        help="steps an actor may run per call (default 1)",
    )


def _add_orchestrator_args(parser: argparse.ArgumentParser) -> None:
    """``Orchestrator`` options a command-line user may need (see its docstring)."""
    parser.add_argument(
        "--trials-per-worker",
        type=_positive_int,
        default=1,
        metavar="N",
        help="trials that may share one worker process (default 1: one each)",
    )
    parser.add_argument(
        "--failure-backoff",
        type=_non_negative_float,
        default=0.2,
        metavar="S",
        help="seconds before the first restart after a failure, doubling (default 0.2)",
    )
    parser.add_argument(
        "--fallback-to-scratch",
        action="store_true",
        help="start a trial over when none of its checkpoints can be loaded",
    )
    parser.add_argument(
        "--save-retry-for",
        type=_non_negative_float,
        default=300.0,
        metavar="S",
        help="seconds an upload is retried while storage is down before the trial pauses "
        "(default 300)",
    )
    parser.add_argument(
        "--max-pending-saves",
        type=_non_negative_int,
        default=2,
        metavar="N",
        help="unpersisted checkpoints a trial may train ahead of (default 2)",
    )
    parser.add_argument(
        "--storage-shared",
        action="store_true",
        help="a local --storage path that every node sees (NFS): skip looking for "
        "checkpoints on other nodes",
    )
    parser.add_argument(
        "--no-strict-metrics",
        dest="strict_metrics",
        action="store_false",
        help="allow --stop metrics that the first result does not report yet",
    )


def _orchestrator_options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "trials_per_worker": args.trials_per_worker,
        "failure_backoff": args.failure_backoff,
        "fallback_to_scratch": args.fallback_to_scratch,
        "save_retry_for": args.save_retry_for,
        "max_pending_saves": args.max_pending_saves,
        "storage_shared": args.storage_shared,
        "strict_metrics": args.strict_metrics,
    }


def _run(args: argparse.Namespace, console: Console) -> int:
    trainable = load_trainable(args.trainable)
    base = _json_arg(args.config, "--config")
    if not isinstance(base, dict):
        raise ConfigError(f"--config must be a JSON object, got {args.config!r}")
    configs = expand_grid(base, None if args.grid is None else _json_arg(args.grid, "--grid"))
    if not args.stop:
        raise ConfigError(
            "give at least one --stop METRIC=VALUE (e.g. --stop training_iteration=10), "
            "or the trials would run forever"
        )
    stop = _parse_stop(args.stop)
    name = args.name or "run-" + datetime.now().strftime("%Y%m%d-%H%M%S")
    printer = _EventPrinter(console)
    # Everything that can be wrong with the arguments is checked here, before Ray starts.
    orch = Orchestrator(
        storage=args.storage,
        name=name,
        max_failures=args.max_failures,
        keep_checkpoints=args.keep_checkpoints,
        checkpoint_score=args.checkpoint_score,
        hooks=[printer],
        result_buffer=args.result_buffer,
        overwrite=args.overwrite,
        **_orchestrator_options(args),
    )
    args.resume_hint = _resume_command(orch)
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

    with ray_session(args.address):
        asyncio.run(main())
    console.print(results_table(trials, args.metric, args.mode))
    done = sum(1 for t in trials if t.state is TrialState.TERMINATED)
    console.print(f"{done}/{len(trials)} trials TERMINATED", highlight=False)
    for trial in trials:
        if trial.state is TrialState.ERROR:
            console.print(f"{trial.id}: ERROR: {trial.error}", style="red", highlight=False)
    return EXIT_OK if done == len(trials) else EXIT_FAILED


# ---------------------------------------------------------------------------- resume


def _configure_resume(parser: argparse.ArgumentParser) -> None:
    _add_storage_args(parser, default_name="required")
    parser.add_argument(
        "--resume-errored", action="store_true", help="also retry trials that ended in ERROR"
    )
    _add_orchestrator_args(parser)
    parser.add_argument(
        "--metric", default=None, help="sort the final table by this metric (last result)"
    )
    parser.add_argument(
        "--mode", choices=("max", "min"), default="max", help="with --metric (default max)"
    )


def _resume(args: argparse.Namespace, console: Console) -> int:
    if not args.name:
        raise ConfigError("resume needs --name: the experiment to continue")
    printer = _EventPrinter(console)
    _require_journal(args.storage, args.name)
    orch = Orchestrator(
        storage=args.storage,
        name=args.name,
        hooks=[printer],
        resume=True,
        resume_errored=args.resume_errored,
        **_orchestrator_options(args),
    )
    args.resume_hint = _resume_command(orch)

    async def main() -> list[Trial]:
        async with orch:
            if not orch.trials:
                return []
            counts: dict[str, int] = {}
            for trial in orch.trials:
                counts[trial.state.value] = counts.get(trial.state.value, 0) + 1
            summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
            console.print(f"resuming {orch.storage_uri}: {summary}", highlight=False)
            return await orch.run()

    with ray_session(args.address):
        trials = asyncio.run(main())
    if not trials:
        raise ConfigError(
            f"no experiment journal at {orch.storage_uri}; check --storage and --name"
        )
    console.print(results_table(trials, args.metric, args.mode))
    done = sum(1 for t in trials if t.state is TrialState.TERMINATED)
    console.print(f"{done}/{len(trials)} trials TERMINATED", highlight=False)
    return EXIT_OK if done == len(trials) else EXIT_FAILED


def _require_journal(storage: str | None, name: str) -> None:
    """Fail before Ray starts when there is nothing to resume."""
    import storage as storage_pkg

    from .journal import JOURNAL_KEY

    uri = Orchestrator(storage=storage, name=name).storage_uri

    async def exists() -> bool:
        try:
            async with storage_pkg.open_storage(uri) as store:
                return bool(await store.exists(JOURNAL_KEY))
        except storage_pkg.StorageError:
            return False

    if not asyncio.run(exists()):
        raise ConfigError(f"no experiment journal at {uri}; check --storage and --name")


class _EventPrinter:
    """A hook: one line per trial start, failure, restore and end."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.started = time.monotonic()

    def _line(self, text: str) -> None:
        elapsed = time.monotonic() - self.started
        self.console.print(f"[{elapsed:6.1f}s] {text}", markup=False, highlight=False)

    async def on_trial_start(self, trial: Trial) -> None:
        self._line(f"{trial.id} started  {json.dumps(trial.config, default=str)}")

    async def on_trial_error(self, trial: Trial, error: BaseException) -> None:
        text = str(error).removeprefix(f"trial {trial.id}: ")
        self._line(f"{trial.id} failure {trial.num_failures}: {text}")

    async def on_trial_restore(self, trial: Trial, checkpoint: Any) -> None:
        self._line(f"{trial.id} restored from checkpoint at iteration {checkpoint.iteration}")

    async def on_trial_complete(self, trial: Trial) -> None:
        self._line(f"{trial.id} finished at iteration {trial.iteration}")


def load_trainable(spec: str) -> type[Trainable]:
    """Import ``module:Class`` (or ``module.Class``) and check it is a Trainable."""
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
    if not is_trainable_class(obj):
        raise ConfigError(f"trainable {spec!r}: {attr} is not a subclass of orchestrator.Trainable")
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


def results_table(trials: Sequence[Trial], metric: str | None, mode: str) -> Table:
    """One row per trial; sorted by ``metric`` (best first) when given."""
    rows = list(trials)
    if metric is not None:
        sign = -1.0 if mode == "max" else 1.0

        def key(trial: Trial) -> float:
            value = (trial.last_result or {}).get(metric)
            if isinstance(value, (int, float)) and math.isfinite(value):
                return sign * float(value)
            return math.inf

        rows.sort(key=key)
    metrics: list[str] = [metric] if metric else []
    for trial in trials:
        for name, value in (trial.last_result or {}).items():
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            if numeric and name not in _BOOKKEEPING and name not in metrics:
                metrics.append(name)
    metrics = metrics[:5]
    table = Table(title="final results", title_justify="left", header_style="bold")
    for column in ("trial", "config", "state", "iter", "failures"):
        table.add_column(column, justify="right" if column in ("iter", "failures") else "left")
    for name in metrics:
        table.add_column(name, justify="right")
    for trial in rows:
        last = trial.last_result or {}
        state = trial.state
        table.add_row(
            trial.id,
            json.dumps(trial.config, default=str),
            Text(state.value, style="blue" if state is TrialState.TERMINATED else "bold red"),
            str(trial.iteration),
            str(trial.num_failures),
            *(_cell(last.get(name)) for name in metrics),
        )
    return table


# ------------------------------------------------------------------------------- ray


#: Starting a local Ray on an overloaded machine can time out (Ray waits 30 s, fixed).
LOCAL_RAY_ATTEMPTS = 2


class RayStartError(OrchestratorError):
    """Ray could not be started or joined (not a usage error: exit status 1)."""


@contextlib.contextmanager
def ray_session(address: str | None, env: Mapping[str, str] | None = None) -> Iterator[None]:
    """Connect to Ray for one command; shut it down afterwards if we started it.

    ``address=None`` joins ``$RAY_ADDRESS`` when set, else starts a *private* local Ray
    (``address="local"``): a bare ``ray.init()`` would join whichever local cluster was
    started last, e.g. another program's. ``env`` is set in this process first, so the
    workers of a local Ray inherit it (a running cluster's workers do not).
    """
    import ray

    if ray.is_initialized():
        yield
        return
    for key, value in (env or {}).items():
        os.environ[key] = value
    if address is None and not os.environ.get("RAY_ADDRESS"):
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        address = "local"
    for attempt in range(1, LOCAL_RAY_ATTEMPTS + 1):
        try:
            ray.init(
                address=address,
                include_dashboard=False if address == "local" else None,
                logging_level=logging.WARNING,
            )
            break
        except (ConnectionError, ValueError) as err:
            raise ConfigError(f"cannot connect to Ray at {address!r}: {err}") from err
        except Exception as err:  # Ray raises a bare Exception when its start times out
            ray.shutdown()
            if address != "local" or attempt == LOCAL_RAY_ATTEMPTS:
                raise RayStartError(
                    f"could not start Ray ({address}) after {attempt} attempt(s): {err}"
                ) from err
            log.warning("a local Ray did not start (%s); trying again", err)
    try:
        yield
    finally:
        ray.shutdown()


# ---------------------------------------------------------------------------- parser

Handler = Callable[[argparse.Namespace, Console], int]

#: ``name -> (help, configure(parser), handler(args, console) -> exit status)``.
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {
    "demo": (
        "a small real sweep with a live table and a recovered failure",
        _configure_demo,
        _demo,
    ),
    "run": ("run a Trainable over a config or a grid of configs", _configure_run, _run),
    "resume": (
        "continue an experiment after its driver died (from its journal in storage)",
        _configure_resume,
        _resume,
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
    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console(highlight=False)
    if not console.is_terminal:  # a log file: do not squeeze tables into 80 columns
        console = Console(highlight=False, width=max(console.width, 130))
    _configure_logging(console, verbose=args.verbose)
    _, _, handler = COMMANDS[args.command]
    try:
        return handler(args, console)
    except ConfigError as err:
        print(f"trialflow {args.command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except RayStartError as err:
        print(f"trialflow {args.command}: error: {err}", file=sys.stderr)
        return EXIT_FAILED
    except StorageError as err:
        print(f"trialflow {args.command}: error: {err}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"trialflow {args.command}: interrupted", file=sys.stderr)
        hint = getattr(args, "resume_hint", None)
        if hint:
            print(f"continue it with: {hint}", file=sys.stderr)
        return EXIT_INTERRUPTED


# --------------------------------------------------------------------------- helpers


def _add_storage_args(parser: argparse.ArgumentParser, default_name: str) -> None:
    parser.add_argument(
        "--storage",
        default=None,
        metavar="URI",
        help="where checkpoints go: a path, file://, s3:// or gs:// URI "
        "(default ~/trialflow_results or $TRIALFLOW_RESULTS_DIR)",
    )
    parser.add_argument(
        "--name", default=None, help=f"experiment name, a folder in the storage ({default_name})"
    )
    parser.add_argument(
        "--address",
        default=None,
        help='a running Ray cluster to join ("auto", host:port); default $RAY_ADDRESS, '
        "else a private local Ray started for this command",
    )


def _configure_logging(console: Console, *, verbose: bool) -> None:
    from rich.logging import RichHandler

    handler = RichHandler(console=console, show_path=False, show_time=False, markup=False)
    logging.basicConfig(
        level=logging.WARNING, format="%(name)s: %(message)s", handlers=[handler], force=True
    )
    logging.getLogger("orchestrator").setLevel(logging.INFO if verbose else logging.WARNING)


def _json_arg(text: str, flag: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(
            f"{flag} is not valid JSON ({err.msg} at column {err.colno}): {text!r}"
        ) from err


def _parse_stop(items: Sequence[str]) -> dict[str, float]:
    stop: dict[str, float] = {}
    for item in items:
        metric, sep, value = item.partition("=")
        try:
            if not sep or not metric.strip():
                raise ValueError
            stop[metric.strip()] = float(value)
        except ValueError:
            raise ConfigError(
                f"--stop {item!r}: expected METRIC=NUMBER, e.g. training_iteration=10"
            ) from None
    return stop


def _resume_command(orch: Orchestrator) -> str:
    """The exact command that continues ``orch``'s experiment."""
    import shlex

    base, _, name = orch.storage_uri.rpartition("/")
    return f"python -m orchestrator resume --storage {shlex.quote(base)} --name {shlex.quote(name)}"


def _score(text: str) -> tuple[str, str]:
    metric, _, mode = text.rpartition(":")
    if not metric or mode not in ("max", "min"):
        raise argparse.ArgumentTypeError(f"expected METRIC:max or METRIC:min, got {text!r}")
    return metric, mode


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value
