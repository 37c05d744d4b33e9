"""Trainables for the facade's restore test, importable by the test, its driver
subprocess and Ray's workers. Until ``<marks>/fast`` exists each step is slow and no
trial goes past step :data:`HOLD_AT` (the test kills the driver while every trial is
held there, however fast or slow the machine); each (re)start appends
``<trial> start:<step it starts from>`` to ``<marks>/starts``."""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any

from orchestrator import tune


def _note(config: dict[str, Any], line: str) -> None:
    with open(os.path.join(config["marks"], "starts"), "a") as f:
        f.write(line + "\n")


#: The last step a trial takes before ``<marks>/fast`` exists.
HOLD_AT = 2


def _wait(config: dict[str, Any], done: int) -> None:
    """Before the step after ``done`` steps."""
    fast = os.path.join(config["marks"], "fast")
    if done < HOLD_AT:
        if not os.path.exists(fast):
            time.sleep(0.3)
        return
    while not os.path.exists(fast):
        time.sleep(0.1)


def slow_counter(config: dict[str, Any]) -> None:
    step = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d, open(os.path.join(d, "step.json")) as f:
            step = json.load(f)
    _note(config, f"{tune.get_context().get_trial_id()} start:{step}")
    while step < config["steps"]:
        _wait(config, step)
        step += 1
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "step.json"), "w") as f:
                json.dump(step, f)
            tune.report({"step": step}, checkpoint=tune.Checkpoint.from_directory(d))


class SlowCounter(tune.Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.step_count = 0
        self.noted = False

    def step(self) -> dict[str, Any]:
        if not self.noted:
            _note(self.config, f"{self.trial_id} start:{self.step_count}")
            self.noted = True
        _wait(self.config, self.step_count)
        self.step_count += 1
        return {"step": self.step_count, "done": self.step_count >= self.config["steps"]}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"step": self.step_count}

    def load_checkpoint(self, checkpoint: Any) -> None:
        self.step_count = checkpoint["step"]
