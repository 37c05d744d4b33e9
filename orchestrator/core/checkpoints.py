"""Checkpoint records and the retention policy that plans their garbage collection.

Pure bookkeeping: no I/O. The state machine asks :class:`RetentionPolicy` which
checkpoints may go once a newer one is *persisted*; the loop deletes them off the
critical path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from orchestrator.core.best import finite, lookup
from orchestrator.errors import ConfigError

ScoreMode = Literal["max", "min"]


@dataclass(frozen=True)
class Checkpoint:
    """A persisted checkpoint of one trial at one training iteration.

    ``key`` is the checkpoint's key inside the experiment's storage; ``uri`` its full
    address (``file:///...``, ``s3://...``, ``gs://...``); ``path`` the local directory
    when the storage is a local path, else ``None``. ``metrics`` is the result reported
    at that iteration. ``manifest`` is the storage manifest (files, sizes, checksums).
    ``node_id`` is the Ray node whose actor persisted it, and ``host`` that node's host
    name: with local storage the nodes do not share, where its files are. Node ids change
    with every Ray start, so a restore or a delete looks for the files (see
    :mod:`orchestrator.actor.locality`) and uses these two only to know where to look first.
    """

    trial_id: str
    iteration: int
    key: str
    uri: str
    path: str | None = None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    manifest: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    node_id: str | None = field(default=None, compare=False)
    host: str | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "trial_id": self.trial_id,
            "iteration": self.iteration,
            "key": self.key,
            "uri": self.uri,
            "path": self.path,
            "metrics": dict(self.metrics),
            "manifest": dict(self.manifest) if self.manifest is not None else None,
            "node_id": self.node_id,
            "host": self.host,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Checkpoint:
        return cls(
            trial_id=str(data["trial_id"]),
            iteration=int(data["iteration"]),
            key=str(data["key"]),
            uri=str(data["uri"]),
            path=data.get("path"),
            metrics=dict(data.get("metrics") or {}),
            manifest=data.get("manifest"),
            node_id=data.get("node_id"),
            host=data.get("host"),
        )


@dataclass(frozen=True)
class RetentionPolicy:
    """Which checkpoints of a trial to keep.

    ``keep=None`` keeps every checkpoint. Otherwise the ``keep`` best by ``score``
    (a ``(metric, "max" | "min")`` pair) or, without a score, the ``keep`` newest are
    kept; the newest persisted checkpoint is always kept as well, since it is the one a
    failure restores from. Pinned checkpoints (being restored) are never deleted.
    """

    keep: int | None = None
    score: tuple[str, ScoreMode] | None = None

    def __post_init__(self) -> None:
        if self.keep is not None and (not isinstance(self.keep, int) or self.keep < 1):
            raise ConfigError(
                f"keep_checkpoints must be a positive integer or None, got {self.keep!r}"
            )
        if self.score is not None:
            if (
                not isinstance(self.score, tuple)
                or len(self.score) != 2
                or not isinstance(self.score[0], str)
                or self.score[1] not in ("max", "min")
            ):
                raise ConfigError(
                    f"checkpoint_score must be a (metric, 'max' | 'min') pair, got {self.score!r}"
                )

    def plan_deletions(
        self, checkpoints: Sequence[Checkpoint], pinned: frozenset[str] = frozenset()
    ) -> list[Checkpoint]:
        """The checkpoints to delete now, oldest first. ``checkpoints`` is oldest first."""
        if self.keep is None or len(checkpoints) <= 1:
            return []
        newest = checkpoints[-1]
        if self.score is None:
            ranked = list(reversed(checkpoints))
        else:
            metric, mode = self.score
            sign = 1.0 if mode == "max" else -1.0

            def rank(ckpt: Checkpoint) -> tuple[float, int]:
                value = finite(lookup(ckpt.metrics, metric))
                if value is None:  # unscored, NaN or infinite (orchestrator.core.best): last
                    return (-math.inf, ckpt.iteration)
                return (sign * value, ckpt.iteration)

            ranked = sorted(checkpoints, key=rank, reverse=True)
        keep = {c.key for c in ranked[: self.keep]} | {newest.key} | set(pinned)
        return [c for c in checkpoints if c.key not in keep]
