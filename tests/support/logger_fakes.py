"""Stand-ins for what the loggers see of an experiment, and readers that check the
files with other code than the code that wrote them (pandas, TensorBoard's reader)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


@dataclass(frozen=True)
class FakeCheckpoint:
    iteration: int
    uri: str = "file:///nowhere"


class FakeTrial:
    """What a hook sees of a Trial, with the loop's bookkeeping done by hand."""

    def __init__(self, trial_id: str, config: dict[str, Any] | None = None) -> None:
        self.id = trial_id
        self.config: dict[str, Any] = dict(config or {"lr": 0.1})
        self.state = "RUNNING"
        self.results: list[dict[str, Any]] = []
        self.last_result: dict[str, Any] | None = None
        self.latest_checkpoint: FakeCheckpoint | None = None

    def report(self, iteration: int, **metrics: Any) -> dict[str, Any]:
        """Record a result as the loop does (after cutting a restarted run's tail)."""
        self.rollback(iteration - 1)
        result = {**metrics, "training_iteration": iteration, "trial_id": self.id}
        self.results.append(result)
        self.last_result = result
        return result

    def rollback(self, iteration: int) -> None:
        self.results = [r for r in self.results if r["training_iteration"] <= iteration]
        self.last_result = self.results[-1] if self.results else None


class MemoryStorage:
    """The part of trialflow's Storage the logger uses: ``async write_bytes`` and
    ``read_bytes``."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.writes: list[str] = []
        self.fail_keys: set[str] = set()

    async def write_bytes(self, key: str, data: bytes) -> None:
        if key in self.fail_keys:
            raise OSError(f"injected failure writing {key}")
        self.objects[key] = bytes(data)
        self.writes.append(key)

    async def read_bytes(self, key: str) -> bytes:
        from storage import NotFound

        if key not in self.objects:
            raise NotFound(f"no {key}", key=key)
        return self.objects[key]


def read_results(trial_dir: Path) -> pd.DataFrame:
    return pd.read_json(trial_dir / "result.json", lines=True)


def read_progress(trial_dir: Path) -> pd.DataFrame:
    return pd.read_csv(trial_dir / "progress.csv")


def accumulator(trial_dir: Path) -> EventAccumulator:
    acc = EventAccumulator(str(trial_dir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def scalars(trial_dir: Path, tag: str) -> list[tuple[int, float]]:
    return [(e.step, e.value) for e in accumulator(trial_dir).Scalars(tag)]


def read_jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def event_files(trial_dir: Path) -> list[Path]:
    return sorted(p for p in trial_dir.iterdir() if ".out.tfevents." in p.name)
