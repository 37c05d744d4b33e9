"""Ray Tune's configuration objects: ``TuneConfig``, ``RunConfig``, ``CheckpointConfig``
and ``FailureConfig``, with Tune's field names and defaults.

They hold what the user wrote; :mod:`orchestrator.tune.plan` translates them into one
``Orchestrator(...)`` and one ``sweep(...)`` call. A field this facade cannot honour is
refused when the object is built, naming it and what to use instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.tune.errors import unsupported

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


@dataclass
class FailureConfig:
    """``max_failures``: restarts a trial may use (-1: no limit); ``fail_fast``: the first
    trial error ends the whole run (``"raise"``: and ``fit`` raises it)."""

    max_failures: int = 0
    fail_fast: bool | str = False


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
                "a trial runs in its worker's directory; write files under "
                "tune.get_context().get_trial_dir()",
            )


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
        refused = {
            "storage_filesystem": (
                self.storage_filesystem,
                "give storage_path as a path, s3://bucket/prefix or gs://bucket/prefix",
            ),
            "sync_config": (self.sync_config, "files go to storage_path directly"),
            "progress_reporter": (
                self.progress_reporter,
                "the live progress table is built in; verbose=0 hides it",
            ),
            "log_to_file": (
                self.log_to_file or None,
                "trial output reaches the driver prefixed with its trial; redirect it there",
            ),
            "local_dir": (self.local_dir, "use storage_path"),
        }
        for name, (value, instead) in refused.items():
            if value is not None:
                raise unsupported(f"RunConfig({name}=...)", instead)
