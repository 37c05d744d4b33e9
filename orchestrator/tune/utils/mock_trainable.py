"""``ray.tune.utils.mock_trainable``: Tune's ``MyTrainableClass``, a trainable whose
learning curve is a sigmoid set by its ``width`` and ``height`` (Tune's examples use it)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np

from orchestrator.tune.trainable import Trainable

__all__ = ["MOCK_ERROR_KEY", "MyTrainableClass"]

MOCK_ERROR_KEY = "mock_error"


class MyTrainableClass(Trainable):
    """Ray Tune's example agent: reward ``height * tanh(timestep / width)``."""

    def setup(self, config: dict[str, Any]) -> None:
        self._sleep_time = config.get("sleep", 0)
        self._mock_error = config.get(MOCK_ERROR_KEY, False)
        self._persistent_error = config.get("persistent_error", False)
        self.timestep = 0
        self.restored = False

    def step(self) -> dict[str, Any]:
        if self._mock_error and self.timestep > 0 and (self._persistent_error or not self.restored):
            raise RuntimeError(f"Failing on purpose! {self.timestep=}")
        if self._sleep_time > 0:
            time.sleep(self._sleep_time)
        self.timestep += 1
        value = np.tanh(float(self.timestep) / self.config.get("width", 1))
        value *= self.config.get("height", 1)
        return {"episode_reward_mean": value}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "checkpoint"), "w") as f:
            f.write(json.dumps({"timestep": self.timestep}))

    def load_checkpoint(self, checkpoint: Any) -> None:
        with open(os.path.join(checkpoint, "checkpoint")) as f:
            self.timestep = json.loads(f.read())["timestep"]
        self.restored = True
