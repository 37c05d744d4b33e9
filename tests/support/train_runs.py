"""Waits and reads of the Ray Train tests: the placement groups released, a saved
epoch, the per-test timeout (shared by the Torch, XGBoost and sweep files)."""

from __future__ import annotations

import os
import time

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
    return int(torch.load(os.path.join(path, "model.pt"))["epoch"])
