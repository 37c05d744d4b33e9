"""Waits and reads of the Ray Train tests: the placement groups released, a saved
epoch, the per-test timeout (shared by the Torch, XGBoost and sweep files); and the two
steps every Torch worker loop here (and ``benchmarks/_train_common.py``'s) takes alike:
resume from the run's checkpoint, report an epoch with rank 0's checkpoint."""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

#: Two Train runs took 108 s on the loaded 2-core machine (load 23), 60 s at load 15.
TRAIN_TIMEOUT_S = 600


def wait_gangs_released(timeout: float = 60.0) -> None:
    """Every placement group (Train's worker groups: the engine makes none) is removed:
    no Train run outlives its trial."""

    from ray.util import placement_group_table

    deadline = time.monotonic() + timeout
    while True:
        live = [g for g in placement_group_table().values() if g["state"] != "REMOVED"]
        if not live:
            return
        assert time.monotonic() < deadline, live
        time.sleep(0.5)


def saved_epoch(path: str | None) -> int:
    import torch

    assert path is not None
    return int(torch.load(os.path.join(path, MODEL_FILE))["epoch"])


#: The file of a Torch worker loop's checkpoint: its state, with the model's as "model".
MODEL_FILE = "model.pt"


def restored_state(model: Any) -> dict[str, Any]:
    """In a Train worker: load the run's checkpoint, if it has one, into ``model`` (before
    ``prepare_model``); the state saved with it (``epoch``...), ``{}`` without."""
    import ray.train
    import torch

    checkpoint = ray.train.get_checkpoint()
    if checkpoint is None:
        return {}
    with checkpoint.as_directory() as directory:
        state: dict[str, Any] = torch.load(os.path.join(directory, MODEL_FILE))
    model.load_state_dict(state["model"])
    return state


def report_epoch(metrics: dict[str, Any], state: dict[str, Any] | None) -> None:
    """In a Train worker: ``ray.train.report(metrics)``, with a checkpoint of ``state``
    (rank 0 passes it, the others None)."""
    import ray.train
    import torch

    with tempfile.TemporaryDirectory() as directory:
        saved = None
        if state is not None:
            torch.save(state, os.path.join(directory, MODEL_FILE))
            saved = ray.train.Checkpoint.from_directory(directory)
        ray.train.report(metrics, checkpoint=saved)
