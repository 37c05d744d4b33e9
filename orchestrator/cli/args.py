"""Argument groups, value parsers and exit statuses that several commands share.

Nothing here imports Ray, storage or the orchestrator when loaded: building the parser
(for ``--help`` or for ``ls``) must stay cheap. Bad values are reported by argparse (exit
status 2, before any command runs) or as :class:`ConfigError` by the command.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from orchestrator.core.locations import DEFAULT_RESULTS_DIR, experiment_uri, results_root
from orchestrator.errors import ConfigError

__all__ = [
    "DEFAULT_RESULTS_DIR",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "add_orchestrator_args",
    "add_storage_args",
    "add_storage_option_arg",
    "add_trial_args",
    "experiment_uri",
    "json_arg",
    "non_negative_float",
    "non_negative_int",
    "one_line_errors",
    "orchestrator_options",
    "parse_stop",
    "positive_float",
    "positive_int",
    "results_root",
    "score",
    "storage_options",
]

#: The exit statuses of every command (see :mod:`orchestrator.cli.main`).
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def one_line_errors() -> tuple[type[Exception], ...]:
    """The errors every command answers with one line and no traceback (a
    :class:`ConfigError` with :data:`EXIT_USAGE`, the others with :data:`EXIT_FAILED`):
    their messages say what is wrong and what to do."""
    from orchestrator.engine.raystart import RayStartError
    from orchestrator.errors import ExperimentLocked, JournalError, LeaseLost
    from storage import StorageError

    return (ConfigError, RayStartError, ExperimentLocked, LeaseLost, StorageError, JournalError)


#: Where experiments go without ``--storage`` (``$TRIALFLOW_RESULTS_DIR`` overrides it);
#: the same default as ``Orchestrator(storage=None)``.


def add_storage_args(
    parser: argparse.ArgumentParser,
    default_name: str | None,
    *,
    ray: bool = True,
    name_required: bool = False,
) -> None:
    """``--storage``; ``--name`` unless ``default_name`` is None; ``--address`` (of
    the Ray to run on) unless ``ray`` is false."""
    parser.add_argument(
        "--storage",
        default=None,
        metavar="URI",
        help=("where checkpoints go" if ray else "where the experiments are")
        + ": a path, file://, s3:// or gs:// URI "
        "(default ~/trialflow_results or $TRIALFLOW_RESULTS_DIR)",
    )
    if default_name is not None:
        parser.add_argument(
            "--name",
            default=None,
            required=name_required,
            help=f"experiment name, a folder in the storage ({default_name})",
        )
    if ray:
        parser.add_argument(
            "--address",
            default=None,
            help='a running Ray cluster to join ("auto", host:port); default $RAY_ADDRESS, '
            "else a private local Ray started for this command",
        )


def add_storage_option_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a storage driver option, e.g. endpoint_url=http://localhost:9000 (repeatable; "
        "VALUE is read as JSON when it parses, else as a string)",
    )


def add_trial_args(parser: argparse.ArgumentParser) -> None:
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
        type=positive_int,
        default=None,
        metavar="N",
        help="keep the N newest checkpoints (or the N best with --checkpoint-score) and "
        "the newest; default: keep all",
    )
    parser.add_argument(
        "--checkpoint-score",
        type=score,
        default=None,
        metavar="METRIC:max|min",
        help="with --keep-checkpoints: keep the best by this metric, e.g. loss:min",
    )
    parser.add_argument(
        "--result-buffer",
        type=positive_int,
        default=None,
        metavar="N",
        help="steps an actor may run per call (default: adaptive, about 20 ms of steps; "
        "1: one step per call)",
    )


def add_orchestrator_args(parser: argparse.ArgumentParser) -> None:
    """``Orchestrator`` options a command-line user may need (see its docstring)."""
    parser.add_argument(
        "--trials-per-worker",
        type=positive_int,
        default=1,
        metavar="N",
        help="trials that may share one worker process (default 1: one each)",
    )
    parser.add_argument(
        "--failure-backoff",
        type=non_negative_float,
        default=0.2,
        metavar="S",
        help="seconds before restarting after a second failure in a row, doubling "
        "(default 0.2; the first restart is at once)",
    )
    parser.add_argument(
        "--spare-actors",
        type=non_negative_int,
        default=1,
        metavar="N",
        help="started, idle actors per resource shape for restarts (default 1; 0: none)",
    )
    parser.add_argument(
        "--fallback-to-scratch",
        action="store_true",
        help="start a trial over when none of its checkpoints can be loaded",
    )
    parser.add_argument(
        "--save-retry-for",
        type=non_negative_float,
        default=300.0,
        metavar="S",
        help="seconds an upload is retried while storage is down before the trial pauses "
        "(default 300)",
    )
    parser.add_argument(
        "--max-pending-saves",
        type=non_negative_int,
        default=2,
        metavar="N",
        help="unpersisted checkpoints a trial may train ahead of (default 2)",
    )
    parser.add_argument(
        "--stop-grace-s",
        type=non_negative_float,
        default=30.0,
        metavar="S",
        help="seconds a stop or pause waits for a step that does not return before the "
        "trial's actor is killed (default 30; at least twice its longest step)",
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
    parser.add_argument(
        "--take-over",
        action="store_true",
        help="take the experiment from the driver that holds its lease (after its machine "
        "died, say); a driver that still runs then stops, writing nothing more",
    )


def orchestrator_from(args: argparse.Namespace, console: Any, *, default_name: str) -> Any:
    """The ``Orchestrator`` that ``run`` (and ``run --space``) builds from its
    arguments: everything checked before Ray starts. ``args.resume_hint`` is set to the
    command that continues it (printed on Ctrl-C)."""
    from datetime import datetime

    from orchestrator.api.orchestrator import Orchestrator
    from orchestrator.cli.common import resume_command
    from orchestrator.cli.present import EventPrinter

    name = args.name or f"{default_name}-" + datetime.now().strftime("%Y%m%d-%H%M%S")
    orch = Orchestrator(
        storage=args.storage,
        name=name,
        max_failures=args.max_failures,
        keep_checkpoints=args.keep_checkpoints,
        checkpoint_score=args.checkpoint_score,
        hooks=[EventPrinter(console)],
        result_buffer=args.result_buffer,
        overwrite=args.overwrite,
        ray_address=args.address,
        **orchestrator_options(args),
    )
    args.resume_hint = resume_command(orch)
    return orch


def orchestrator_options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "trials_per_worker": args.trials_per_worker,
        "failure_backoff": args.failure_backoff,
        "spare_actors": args.spare_actors,
        "fallback_to_scratch": args.fallback_to_scratch,
        "save_retry_for": args.save_retry_for,
        "max_pending_saves": args.max_pending_saves,
        "stop_grace_s": args.stop_grace_s,
        "storage_shared": args.storage_shared,
        "strict_metrics": args.strict_metrics,
        "take_over": args.take_over,
    }


def storage_options(items: Sequence[str]) -> dict[str, Any]:
    """``--storage-option KEY=VALUE`` flags as driver options."""
    options: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"--storage-option {item!r}: expected KEY=VALUE, e.g. "
                "endpoint_url=http://localhost:9000"
            )
        try:
            options[key.strip()] = json.loads(text)
        except json.JSONDecodeError:
            options[key.strip()] = text
    return options


def json_arg(text: str, flag: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(
            f"{flag} is not valid JSON ({err.msg} at column {err.colno}): {text!r}"
        ) from err


def parse_stop(items: Sequence[str]) -> dict[str, float]:
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


def score(text: str) -> tuple[str, str]:
    metric, _, mode = text.rpartition(":")
    if not metric or mode not in ("max", "min"):
        raise argparse.ArgumentTypeError(f"expected METRIC:max or METRIC:min, got {text!r}")
    return metric, mode


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value
