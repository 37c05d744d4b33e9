"""An experiment's settings as one frozen value of a few frozen groups, one per concept.

``Orchestrator(...)`` takes every setting as a keyword argument (its public shorthand)
and builds one :class:`ExperimentSettings` of them, checked there, once; the session,
the journal's reader, the resumption and each trial's policy read the group they need
(``settings.failures.failure_backoff``), never a loose argument. The groups follow
Ray Tune's ``RunConfig``/``CheckpointConfig``/``FailureConfig``:

- :class:`~orchestrator.core.checkpoints.RetentionPolicy`: which checkpoints a trial
  keeps, by default (``keep_checkpoints``, ``checkpoint_score``);
- :class:`FaultTolerance`: what a failure costs (``max_failures``, the back-off, the
  fallback to scratch, warm spares, the grace a stopping actor gets);
- :class:`Buffering`: how far work runs ahead of what is stored and recorded
  (``result_buffer``, ``max_pending_saves``, ``journal_interval``);
- :class:`StorageUse`: how the experiment's storage is used (``storage_shared``,
  ``save_retry_for``); where it is, and its driver's options, are what entering opens
  (``orchestrator.api.experiment.Opening``);
- :class:`Continuation`: what happens to an experiment of that name already in storage
  (``resume``, ``resume_errored``, ``overwrite``).

Every message of a mistake starts with ``Orchestrator:`` and names the keyword.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Literal

from orchestrator.core.checkpoints import RetentionPolicy
from orchestrator.core.validate import check_failures, check_int, check_seconds
from orchestrator.errors import ConfigError

__all__ = [
    "Buffering",
    "Continuation",
    "ExperimentSettings",
    "FaultTolerance",
    "StorageMode",
    "StorageUse",
]

_WHERE = "Orchestrator"


class StorageMode(enum.Enum):
    """Where checkpoints live, which decides how they are saved, found and deleted."""

    #: A local path the nodes may not share: a checkpoint is wherever a disk holds it,
    #: found by looking (:mod:`orchestrator.actor.locality`); actors commit small ones.
    LOCAL = "local"
    #: A local path every node sees (NFS, ``storage_shared=True``): no looking.
    SHARED = "shared"
    #: S3 or GCS: uploaded by each node's persister, downloaded by restoring actors.
    REMOTE = "remote"

    @property
    def is_local(self) -> bool:
        return self is not StorageMode.REMOTE


@dataclass(frozen=True)
class FaultTolerance:
    """What a failure costs (see ``Orchestrator``'s docstring for each)."""

    max_failures: int = 0
    failure_backoff: float = 0.2
    fallback_to_scratch: bool = False
    spare_actors: int = 1
    stop_grace_s: float = 30.0

    def __post_init__(self) -> None:
        check_failures(self.max_failures, _WHERE)
        check_int(self.spare_actors, "spare_actors", _WHERE, least=0)
        check_seconds(self.failure_backoff, "failure_backoff", _WHERE)
        check_seconds(self.stop_grace_s, "stop_grace_s", _WHERE)


@dataclass(frozen=True)
class Buffering:
    """How far work runs ahead of what is stored and recorded."""

    result_buffer: int | None = None  # None: adaptive (see spec.ADAPTIVE_SLICE_S)
    max_pending_saves: int = 2
    journal_interval: float = 1.0

    def __post_init__(self) -> None:
        if self.result_buffer is not None:
            check_int(self.result_buffer, "result_buffer", _WHERE)
        check_int(self.max_pending_saves, "max_pending_saves", _WHERE, least=0)
        check_seconds(self.journal_interval, "journal_interval", _WHERE)


@dataclass(frozen=True)
class StorageUse:
    """How the experiment's storage is used."""

    shared: bool = False
    save_retry_for: float = 300.0

    def __post_init__(self) -> None:
        check_seconds(self.save_retry_for, "save_retry_for", _WHERE)


@dataclass(frozen=True)
class Continuation:
    """What becomes of an experiment of the same name already in storage."""

    resume: bool = False
    resume_errored: bool | Literal["restart"] = False
    overwrite: bool = False


@dataclass(frozen=True)
class ExperimentSettings:
    """``Orchestrator``'s settings (see its docstring for what each does), checked."""

    name: str = "exp"
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)
    failures: FaultTolerance = field(default_factory=FaultTolerance)
    buffering: Buffering = field(default_factory=Buffering)
    storage: StorageUse = field(default_factory=StorageUse)
    continuation: Continuation = field(default_factory=Continuation)
    trials_per_worker: int = 1
    strict_metrics: bool = True
    hook_slow_after: float = 10.0

    def __post_init__(self) -> None:
        name = self.name
        if (
            not isinstance(name, str)
            or not name.strip()
            or name != name.strip()
            or "/" in name
            or name in (".", "..")
            or not name.isprintable()
        ):
            raise ConfigError(
                "experiment name must be a non-empty str without '/', control characters, "
                f"or spaces at either end (it names a directory or prefix), got {name!r}"
            )
        check_int(self.trials_per_worker, "trials_per_worker", _WHERE)
        check_seconds(self.hook_slow_after, "hook_slow_after", _WHERE)
        if self.continuation.resume and self.continuation.overwrite:
            raise ConfigError(
                f"experiment {name!r}: resume=True continues the experiment and "
                "overwrite=True deletes it; pass one of them"
            )

    def storage_mode(self, is_local: bool) -> StorageMode:
        if not is_local:
            return StorageMode.REMOTE
        return StorageMode.SHARED if self.storage.shared else StorageMode.LOCAL
