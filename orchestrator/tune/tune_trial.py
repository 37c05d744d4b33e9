"""The ``trial`` that Tune's callbacks, ``trial_name_creator`` and
``trial_dirname_creator`` receive: a read-only view of a trialflow trial with Ray Tune's
attribute names."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from orchestrator.tune.checkpoint import Checkpoint

__all__ = ["TuneTrial", "tune_checkpoint", "tune_status"]

#: trialflow's states as Tune's statuses (Tune has no STARTING or RESTORING).
_STATUS = {
    "PENDING": "PENDING",
    "STARTING": "PENDING",
    "RESTORING": "RUNNING",
    "RUNNING": "RUNNING",
    "PAUSED": "PAUSED",
    "TERMINATED": "TERMINATED",
    "ERROR": "ERROR",
}


def tune_status(state: Any) -> str:
    return _STATUS.get(getattr(state, "value", str(state)), str(state))


def tune_checkpoint(checkpoint: Any) -> Checkpoint | None:
    """A persisted trialflow checkpoint as Tune's (its local path, else its URI)."""
    if checkpoint is None:
        return None
    return Checkpoint(checkpoint.path or checkpoint.uri)


class TuneTrial:
    """A trial as Tune's ``Trial`` (``trial_id``, ``config``, ``last_result``, ``status``,
    ``checkpoint``, ``local_path``...); ``str(trial)`` is its name."""

    def __init__(
        self,
        handle: Any,
        experiment_path: str,
        trainable_name: str,
        name_creator: Callable[[Any], str] | None = None,
    ) -> None:
        self._handle = handle
        self._experiment_path = experiment_path
        self.trainable_name = trainable_name
        self._name_creator = name_creator
        self._name: str | None = None

    @property
    def trial_id(self) -> str:
        return str(self._handle.id)

    @property
    def config(self) -> dict[str, Any]:
        return dict(self._handle.config)

    @property
    def evaluated_params(self) -> dict[str, Any]:
        return self.config

    @property
    def experiment_tag(self) -> str:
        return self.trial_id.rpartition("_")[2].lstrip("0") or "0"

    @property
    def last_result(self) -> dict[str, Any]:
        result = self._handle.last_result
        return {**result, "config": self.config} if result else {}

    @property
    def status(self) -> str:
        return tune_status(self._handle.state)

    def is_finished(self) -> bool:
        return self.status in ("TERMINATED", "ERROR")

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The newest persisted checkpoint."""
        return tune_checkpoint(self._handle.latest_checkpoint)

    @property
    def num_failures(self) -> int:
        return int(self._handle.num_failures)

    @property
    def error(self) -> BaseException | None:
        return self._handle.error  # type: ignore[no-any-return]

    @property
    def local_path(self) -> str:
        """The trial's directory: its logs and checkpoints."""
        return os.path.join(self._experiment_path, self.trial_id)

    path = local_path
    logdir = local_path
    storage_path = local_path

    @property
    def node_ip(self) -> str | None:
        return self._handle.host  # type: ignore[no-any-return]

    @property
    def custom_trial_name(self) -> str | None:
        return str(self._name_creator(self)) if self._name_creator is not None else None

    def __str__(self) -> str:
        if self._name is None:
            self._name = self.custom_trial_name or f"{self.trainable_name}_{self.trial_id}"
        return self._name

    __repr__ = __str__
