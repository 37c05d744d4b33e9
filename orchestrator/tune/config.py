"""Ray Tune's configuration objects: ``TuneConfig``, ``RunConfig``, ``CheckpointConfig``
and ``FailureConfig``, with Tune's field names and defaults.

They hold what the user wrote; :mod:`orchestrator.tune.run_plan` translates them into one
``Orchestrator(...)`` and one ``sweep(...)`` call. Every field is checked when the
object is built, before Ray starts: a wrong value is a ``ConfigError`` (a
``ValueError``, as Tune raises) naming the argument as written (``TuneConfig(mode=...)``)
in Tune's words where Tune has some; a field this facade cannot honour is refused,
naming it and what to use instead.
"""

from __future__ import annotations

import datetime
import numbers
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

from orchestrator.errors import ConfigError
from orchestrator.tune.error import unsupported
from orchestrator.tune.progress_reporter import check_reporter
from orchestrator.tune.ray_configs import as_ours

__all__ = ["CheckpointConfig", "FailureConfig", "RunConfig", "TuneConfig"]


@dataclass
class CheckpointConfig:
    """Which checkpoints a trial keeps and when a class trainable saves one.

    ``num_to_keep`` (None: all) with ``checkpoint_score_attribute`` and
    ``checkpoint_score_order`` ("max"/"min"; without an attribute, the newest are kept);
    ``checkpoint_frequency`` (every N iterations) and ``checkpoint_at_end`` apply to
    class trainables only, as in Tune (a function checkpoints when it reports one).
    """

    num_to_keep: int | None = None
    checkpoint_score_attribute: str | None = None
    checkpoint_score_order: Literal["max", "min"] = "max"
    checkpoint_frequency: int = 0
    checkpoint_at_end: bool | None = None

    def __post_init__(self) -> None:
        keep = self.num_to_keep
        if keep is not None and (not _is_int(keep) or keep < 1):
            _bad(
                "CheckpointConfig",
                "num_to_keep",
                f"Received invalid num_to_keep: {keep!r}. Must be None or an integer >= 1.",
            )
        if self.checkpoint_score_order not in ("max", "min"):
            _bad(
                "CheckpointConfig",
                "checkpoint_score_order",
                f'checkpoint_score_order must be either "max" or "min", got '
                f"{self.checkpoint_score_order!r}.",
            )
        attribute = self.checkpoint_score_attribute
        if attribute is not None and not isinstance(attribute, str):
            _bad(
                "CheckpointConfig",
                "checkpoint_score_attribute",
                _want("a metric's name", attribute),
            )
        every = self.checkpoint_frequency
        if not _is_int(every) or every < 0:
            _bad(
                "CheckpointConfig",
                "checkpoint_frequency",
                f"checkpoint_frequency must be >=0, got {every!r}",
            )
        if self.checkpoint_at_end not in (None, True, False):
            _bad(
                "CheckpointConfig",
                "checkpoint_at_end",
                _want("True, False or None", self.checkpoint_at_end),
            )


@dataclass
class FailureConfig:
    """``max_failures``: restarts a trial may use (-1: no limit); ``fail_fast``: the first
    trial error ends the whole run (``"raise"``: and ``fit`` raises it)."""

    max_failures: int = 0
    fail_fast: bool | str = False

    def __post_init__(self) -> None:
        fast = self.fail_fast
        if isinstance(fast, str) and fast.upper() == "RAISE":
            self.fail_fast = "raise"
        elif not isinstance(fast, bool):
            _bad(
                "FailureConfig",
                "fail_fast",
                f"fail_fast must be one of {{bool, 'raise'}}. Got {fast!r}.",
            )
        if not _is_int(self.max_failures) or self.max_failures < -1:
            _bad(
                "FailureConfig",
                "max_failures",
                _want(
                    "an int >= 0 (restarts a trial may use), or -1 for no limit", self.max_failures
                ),
            )
        if self.fail_fast and self.max_failures != 0:
            _bad(
                "FailureConfig",
                "max_failures",
                f"max_failures must be 0 if fail_fast={self.fail_fast!r}.",
            )


@dataclass
class TuneConfig:
    """How the population is searched and scheduled (Ray Tune's fields).

    ``reuse_actors`` defaults to None, which here means True: a finished trial's worker
    process starts the next trial with a fresh trainable object (saving a process start,
    about a CPU-second, per trial); pass False for Tune's default of one process each.
    """

    mode: str | None = None
    metric: str | None = None
    search_alg: Any = None
    scheduler: Any = None
    num_samples: int = 1
    max_concurrent_trials: int | None = None
    time_budget_s: float | None = None
    reuse_actors: bool | None = None
    trial_name_creator: Callable[[Any], str] | None = None
    trial_dirname_creator: Callable[[Any], str] | None = None
    chdir_to_trial_dir: Any = "DEPRECATED"

    def __post_init__(self) -> None:
        if self.chdir_to_trial_dir != "DEPRECATED":
            raise unsupported(
                "TuneConfig(chdir_to_trial_dir=...)",
                "a trial runs in its trial directory, as on Tune; set the environment "
                "variable RAY_CHDIR_TO_TRIAL_DIR=0 to leave it in its worker's directory",
            )
        if self.mode is not None and self.mode not in ("min", "max"):
            _bad("TuneConfig", "mode", f"must be one of ['min', 'max'], got {self.mode!r}")
        if self.metric is not None and not isinstance(self.metric, str):
            _bad("TuneConfig", "metric", _want("a reported metric's name", self.metric))
        samples = self.num_samples
        if not _is_int(samples) or (samples < 1 and samples != -1):
            _bad("TuneConfig", "num_samples", _want("an int >= 1, or -1 (until stopped)", samples))
        limit = self.max_concurrent_trials
        if limit is not None and (not _is_int(limit) or limit < 0):
            _bad(
                "TuneConfig",
                "max_concurrent_trials",
                f"`max_concurrent_trials` must be greater or equal than 1, got {limit!r}.",
            )
        budget = self.time_budget_s
        if isinstance(budget, datetime.timedelta):
            budget = budget.total_seconds()
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, numbers.Real) or budget <= 0
        ):
            _bad("TuneConfig", "time_budget_s", _want("seconds > 0, or None", self.time_budget_s))
        if self.reuse_actors not in (None, True, False):
            _bad("TuneConfig", "reuse_actors", _want("True, False or None", self.reuse_actors))
        for name in ("trial_name_creator", "trial_dirname_creator"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                _bad("TuneConfig", name, _want("a function of the trial returning a str", value))


@dataclass
class RunConfig:
    """Where the run is stored and when it stops (Ray Tune's fields).

    ``storage_path``: a path, ``s3://...`` or ``gs://...`` (default ``~/ray_results``,
    or ``$TUNE_RESULT_DIR``); the run lives in ``<storage_path>/<name>``.
    ``verbose``: 0 hides the live progress table.
    """

    name: str | None = None
    storage_path: str | None = None
    storage_filesystem: Any = None
    failure_config: FailureConfig | None = None
    checkpoint_config: CheckpointConfig | None = None
    sync_config: Any = None
    verbose: int | None = None
    stop: Any = None
    callbacks: Sequence[Any] | None = None
    progress_reporter: Any = None
    log_to_file: Any = False
    local_dir: Any = None

    def __post_init__(self) -> None:
        self.failure_config = as_ours(self.failure_config, FailureConfig)
        self.checkpoint_config = as_ours(self.checkpoint_config, CheckpointConfig)
        for argument, kind in (
            ("failure_config", FailureConfig),
            ("checkpoint_config", CheckpointConfig),
        ):
            value = getattr(self, argument)
            if value is not None and not isinstance(value, kind):
                _bad("RunConfig", argument, _want(f"a tune.{kind.__name__}", value))
        refused = {
            "storage_filesystem": (
                self.storage_filesystem,
                "give storage_path as a path, s3://bucket/prefix or gs://bucket/prefix",
            ),
            "sync_config": (self.sync_config, "files go to storage_path directly"),
            "log_to_file": (
                self.log_to_file or None,
                "trial output reaches the driver prefixed with its trial; redirect it there",
            ),
            "local_dir": (self.local_dir, "use storage_path"),
        }
        for name, (value, instead) in refused.items():
            if value is not None:
                raise unsupported(f"RunConfig({name}=...)", instead)
        check_reporter(self.progress_reporter, "RunConfig(progress_reporter=...)")
        if self.name is not None and (not isinstance(self.name, str) or not self.name):
            _bad("RunConfig", "name", _want("a non-empty str", self.name))
        path = self.storage_path
        if path is not None and not isinstance(path, (str, os.PathLike)):
            _bad("RunConfig", "storage_path", _want("a path, s3://... or gs://...", path))
        if path is not None:
            self.storage_path = os.fspath(path)
        if self.verbose is not None and (not _is_int(self.verbose) or self.verbose < 0):
            _bad("RunConfig", "verbose", _want("an int from 0 (silent) to 3", self.verbose))
        if self.callbacks is not None and (
            isinstance(self.callbacks, (str, bytes)) or not isinstance(self.callbacks, Sequence)
        ):
            _bad("RunConfig", "callbacks", _want("a list of tune.Callback", self.callbacks))


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _want(what: str, got: Any) -> str:
    return f"must be {what}, got {got!r}"


def _bad(config: str, argument: str, words: str) -> NoReturn:
    """A wrong value: one line naming the argument as the user wrote it."""
    raise ConfigError(f"{config}({argument}=...): {words}")
