"""A trial as the journal recorded it (``views.experiments.StoredTrial``), shaped like a
trialflow ``Trial`` handle for a ``ResultGrid`` read without running anything."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RecordedTrial"]


@dataclass(frozen=True)
class _State:
    value: str


@dataclass(frozen=True)
class _Checkpoint:
    path: str | None
    uri: str
    metrics: dict[str, Any]


class RecordedTrial:
    def __init__(self, record: Any, experiment_path: str) -> None:
        self._record = record
        self.id: str = record.id
        self.config: dict[str, Any] = dict(record.config_now or record.config)
        self.state = _State(record.state)
        self.results: list[dict[str, Any]] = list(record.results)
        self.num_failures: int = record.num_failures
        self.error: BaseException | None = RuntimeError(record.error) if record.error else None
        self.checkpoints = [_checkpoint(c, experiment_path) for c in record.checkpoints]

    @property
    def last_result(self) -> dict[str, Any] | None:
        return self.results[-1] if self.results else None

    @property
    def latest_checkpoint(self) -> _Checkpoint | None:
        return self.checkpoints[-1] if self.checkpoints else None


def _checkpoint(data: dict[str, Any], experiment_path: str) -> _Checkpoint:
    """A kept checkpoint where it is now: under the experiment's directory by its key
    (a run moved or copied elsewhere has its checkpoints there, as on Tune)."""
    uri = str(data.get("uri") or "")
    key = data.get("key")
    if isinstance(key, str) and key and not key.startswith("/"):
        base = experiment_path.rstrip("/")
        uri = base + "/" + key if "://" in base else "file://" + base + "/" + key
    path = uri[len("file://") :] if uri.startswith("file://") else None
    return _Checkpoint(path, uri, dict(data.get("metrics") or {}))
