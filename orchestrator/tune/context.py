"""Inside a trial: ``tune.report``, ``tune.get_checkpoint`` and ``tune.get_context``.

They run in the trial's worker. ``report`` and ``get_checkpoint`` are trialflow's
(:mod:`orchestrator.actor.function`) with Tune's ``Checkpoint`` objects; the context
(trial id, name, directory, the experiment's name, the trial's resources) is set by the
facade's adapters (:mod:`orchestrator.tune.adapters`) before the user's code runs. A
result gets Tune's automatic keys (``done``, ``time_since_restore``, ``pid``...) here,
so callbacks and stop criteria that read them find them.
"""

from __future__ import annotations

import contextvars
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import NotInTrial
from orchestrator.tune.checkpoint import Checkpoint
from orchestrator.tune.error import unsupported

__all__ = [
    "RunInfo",
    "TrialContext",
    "TuneContext",
    "get_checkpoint",
    "get_context",
    "report",
]


@dataclass(frozen=True)
class RunInfo:
    """What every trial of a run knows about the run (pickled with its trainable)."""

    experiment_name: str
    experiment_path: str  # a local path, or the storage URI
    trainable_name: str
    trial_name_creator: Callable[[Any], str] | None = None
    resources: Mapping[str, float] | None = None


@dataclass(frozen=True)
class TrialStub:
    """The ``trial`` a ``trial_name_creator`` gets in a worker (Tune's common fields)."""

    trial_id: str
    config: Mapping[str, Any]
    trainable_name: str

    @property
    def experiment_tag(self) -> str:
        return self.trial_id.rpartition("_")[2].lstrip("0") or "0"

    def __str__(self) -> str:
        return f"{self.trainable_name}_{self.trial_id}"


def trial_name(info: RunInfo, trial_id: str, config: Mapping[str, Any]) -> str:
    stub = TrialStub(trial_id, config, info.trainable_name)
    creator = info.trial_name_creator
    return str(creator(stub)) if creator is not None else str(stub)


@dataclass
class TrialContext:
    """One trial's context in its worker, and the counters behind Tune's automatic keys."""

    trial_id: str
    config: Mapping[str, Any]
    info: RunInfo
    started: float = field(default_factory=time.time)
    steps: int = 0

    @property
    def trial_name(self) -> str:
        return trial_name(self.info, self.trial_id, self.config)

    @property
    def trial_dir(self) -> str:
        base = self.info.experiment_path
        if "://" in base:  # remote storage: a local directory for the trial's own files
            import tempfile

            base = os.path.join(tempfile.gettempdir(), "trialflow-tune", self.info.experiment_name)
        path = os.path.join(base, self.trial_id)
        os.makedirs(path, exist_ok=True)
        return path

    def restarted(self) -> None:
        self.started, self.steps = time.time(), 0

    def add_keys(self, result: dict[str, Any]) -> dict[str, Any]:
        """Tune's automatic keys (``done``, ``time_since_restore``...), where unset."""
        self.steps += 1
        now = time.time()
        result.setdefault("done", False)
        result.setdefault("timestamp", int(now))
        result.setdefault("date", time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(now)))
        result.setdefault("time_since_restore", now - self.started)
        result.setdefault("iterations_since_restore", self.steps)
        result.setdefault("pid", os.getpid())
        result.setdefault("hostname", _HOST)
        result.setdefault("node_ip", _node_ip())
        return result


_HOST = socket.gethostname()
_NODE_IP: list[str] = []


def _node_ip() -> str:
    if not _NODE_IP:
        try:
            import ray

            _NODE_IP.append(ray.util.get_node_ip_address())
        except Exception:
            _NODE_IP.append("127.0.0.1")
    return _NODE_IP[0]


#: The trial whose code runs here: set in the function's thread (and copied into its
#: asyncio tasks); ``_LATEST`` serves other threads the user's code may start.
_current: contextvars.ContextVar[TrialContext | None] = contextvars.ContextVar(
    "trialflow_tune_context", default=None
)
_LATEST: list[TrialContext] = []


def enter(context: TrialContext) -> None:
    _current.set(context)
    _LATEST[:] = [context]


def to_trial_dir(context: TrialContext) -> None:
    """Make the trial's directory the working directory, as Tune does
    (``RAY_CHDIR_TO_TRIAL_DIR=0`` leaves it); the first directory left is in
    ``TUNE_ORIG_WORKING_DIR``, as on Tune. A trial's files written by relative path
    then land beside its results."""
    if os.environ.get("RAY_CHDIR_TO_TRIAL_DIR", "1") == "0":
        return
    os.environ.setdefault("TUNE_ORIG_WORKING_DIR", os.getcwd())
    os.chdir(context.trial_dir)


def current() -> TrialContext | None:
    return _current.get() or (_LATEST[0] if _LATEST else None)


class TuneContext:
    """Ray Tune's ``TuneContext``: what a trial knows about itself."""

    def __init__(self, context: TrialContext) -> None:
        self._context = context

    def get_trial_id(self) -> str:
        return self._context.trial_id

    def get_trial_name(self) -> str:
        return self._context.trial_name

    def get_trial_dir(self) -> str:
        """A local directory for the trial's own files (under the run's directory with
        local storage)."""
        return self._context.trial_dir

    def get_experiment_name(self) -> str:
        return self._context.info.experiment_name

    def get_trial_resources(self) -> dict[str, float]:
        return dict(self._context.info.resources or {"cpu": 1.0})

    def get_world_size(self) -> int:
        return 1

    def get_world_rank(self) -> int:
        return 0

    def get_local_rank(self) -> int:
        return 0

    def get_local_world_size(self) -> int:
        return 1

    def get_node_rank(self) -> int:
        return 0

    def get_metadata(self) -> dict[str, Any]:
        return {}

    def get_storage(self) -> Any:
        raise unsupported(
            "TuneContext.get_storage()", "checkpoints go through tune.report(checkpoint=...)"
        )


def _outside(what: str, err: NotInTrial | None = None) -> NotInTrial:
    return NotInTrial(
        f"tune.{what}() was called outside a trial: call it from the training function "
        "given to tune.Tuner (or from code it calls, in its thread); a class trainable "
        "returns its metrics from step() instead"
    )


def get_context() -> TuneContext:
    context = current()
    if context is None:
        raise _outside("get_context")
    return TuneContext(context)


def report(
    metrics: Mapping[str, Any],
    checkpoint: Checkpoint | str | None = None,
    checkpoint_dir_name: str | None = None,
) -> None:
    """Report one iteration's ``metrics`` (and a checkpoint directory to persist: its
    files are moved, leaving the directory empty and free to reuse or delete)."""
    from orchestrator.actor.function import report as report_here

    if checkpoint_dir_name is not None:
        raise unsupported(
            "tune.report(checkpoint_dir_name=...)",
            "a checkpoint's directory is named by the trial's iteration; keep your own "
            "names in files inside the checkpoint",
        )

    if not isinstance(metrics, Mapping):
        raise TypeError(f"tune.report() takes a dict of metrics, got {type(metrics).__name__}")
    result = dict(metrics)
    context = current()
    if context is not None and context.info is not None:
        context.add_keys(result)
    path = None
    if checkpoint is not None:
        path = _checkpoint_path(checkpoint)
        if "://" in path:
            raise unsupported(
                f"tune.report(checkpoint=Checkpoint({path!r}))",
                "report a local directory; it is persisted to the run's storage",
            )
    try:
        report_here(result, checkpoint=path)
    except NotInTrial as err:
        raise _outside("report", err) from None


def _checkpoint_path(checkpoint: Any) -> str:
    """A reported checkpoint's directory: ours, a path, or Ray's ``Checkpoint``
    (``ray.train.Checkpoint.from_directory(d)``, as Tune's docs write it) of a local one."""
    if isinstance(checkpoint, Checkpoint):
        return checkpoint.path
    filesystem = getattr(checkpoint, "filesystem", None)
    if filesystem is not None and isinstance(getattr(checkpoint, "path", None), str):
        if type(filesystem).__name__ != "LocalFileSystem":
            raise unsupported(
                f"report(checkpoint=Checkpoint({checkpoint.path!r}) on "
                f"{type(filesystem).__name__})",
                "report a local directory; it is persisted to the run's storage",
            )
        return str(checkpoint.path)
    return os.fspath(checkpoint)


def get_checkpoint() -> Checkpoint | None:
    """The checkpoint this run resumes from (a local directory), or None."""
    from orchestrator.actor.function import get_checkpoint as checkpoint_here

    try:
        path = checkpoint_here()
    except NotInTrial as err:
        raise _outside("get_checkpoint", err) from None
    return Checkpoint(path) if path is not None else None
