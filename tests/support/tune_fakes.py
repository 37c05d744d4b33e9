"""A trial of the Tune facade's result views, faked as plain data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class _State:
    value: str


@dataclass
class FakeTrial:
    id: str
    values: list[float]
    state: _State = field(default_factory=lambda: _State("TERMINATED"))
    error: BaseException | None = None
    checkpoints: list[Any] = field(default_factory=list)
    latest_checkpoint: Any = None

    @property
    def config(self) -> dict[str, Any]:
        return {"id": self.id}

    @property
    def results(self) -> list[dict[str, Any]]:
        return [
            {"loss": v, "gain": -v, "training_iteration": i + 1, "trial_id": self.id}
            for i, v in enumerate(self.values)
        ]

    @property
    def last_result(self) -> dict[str, Any] | None:
        return self.results[-1] if self.values else None
