"""Where a Ray Train run's time goes, for ``bench_train --profile``: a callback given to
both systems' trainers beside their report callback, stamping Train's controller's
steps (``time.time()``) into a file of the run's Train storage, one file a run; and
the run's CPU seconds by kind of process (robust to other users' load, unlike wall
time).

It uses Train V2's developer callback interfaces (as ``TrialReportCallback`` does), so
it is a probe for the benchmark only: the same on both sides, a few file writes a run.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ray.train.v2._internal.execution.callback import ControllerCallback, WorkerGroupCallback

from ._core_common import CpuSampler

__all__ = ["CpuByProcess", "StampCallback", "read_stamps"]

#: The stamps, in the order a run passes them.
STEPS = ("controller_started", "group_starting", "group_started", "finished")


class StampCallback(ControllerCallback, WorkerGroupCallback):
    """Stamps ``STEPS`` of one ``fit()`` into ``<directory>/stamps-<id>.json``, with the
    trial's ``t_fn`` (when its function built the trainer) beside them."""

    def __init__(self, directory: str, t_fn: float) -> None:
        self._path = os.path.join(directory, f"stamps-{uuid.uuid4().hex}.json")
        self._stamps: dict[str, float] = {"t_fn": t_fn}

    def _stamp(self, step: str) -> None:
        self._stamps.setdefault(step, time.time())
        os.makedirs(os.path.dirname(self._path), exist_ok=True)
        Path(self._path).write_text(json.dumps(self._stamps))

    def after_controller_start(self, train_run_context: Any) -> None:
        self._stamp("controller_started")

    def before_worker_group_start(self, worker_group_context: Any) -> None:
        self._stamp("group_starting")

    def after_worker_group_start(self, worker_group: Any) -> None:
        self._stamp("group_started")

    def after_controller_finish(self, result: Any) -> None:
        self._stamp("finished")


def read_stamps(directory: str) -> list[Mapping[str, float]]:
    """Every run's stamps under ``directory`` (a sweep's Train storage)."""
    runs = []
    for path in Path(directory).glob("stamps-*.json"):
        try:
            runs.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return runs


class CpuByProcess(CpuSampler):
    """CPU seconds by kind of process, finer than ``CpuSampler``'s: each Ray worker by
    the actor class it runs (``ray::TrainController``, ``ray::RayTrainWorker``, a
    trial's actor...), then raylet, GCS and the rest."""

    def _kind(self, cmdline: str) -> str:
        # The latest name wins (the sampler classifies each time): a worker is
        # "ray::IDLE" until its actor starts.
        if cmdline.startswith("ray::"):
            return cmdline.split(" ", 1)[0].split(".", 1)[0]
        return super()._kind(cmdline)
