"""The benchmark trainables' bodies, written once for ours and for Ray Tune.

Each system's trainable is ``class X(SomeSteps, <its Trainable>)``: both base classes
call the same ``setup``/``step``/``save_checkpoint``/``load_checkpoint``, and both set
``self.config``, ``self.iteration`` and ``self.trial_id``, so one body serves the two
and a comparison can never drift because one side's copy changed.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ._sched_common import EventLog, curve_value, pbt_toy_step


def _save_count(checkpoint_dir: Any, count: int) -> None:
    with open(os.path.join(checkpoint_dir, "state"), "w") as fh:
        fh.write(str(count))


def _load_count(checkpoint_dir: Any) -> int:
    with open(os.path.join(checkpoint_dir, "state")) as fh:
        return int(fh.read())


class _Steps:
    config: Any
    iteration: Any
    trial_id: Any

    def _nap(self) -> None:
        if self.config.get("step_s"):
            time.sleep(self.config["step_s"])


class SleepySteps(_Steps):
    """A step sleeps ``config["step_s"]`` (0: a trivial step); its score is
    ``config["x"]``. Every result carries ``t`` (when the step ended) and ``t_start``
    (when this trial's trainable was set up or reset), both ``time.time()``."""

    def setup(self, config: dict[str, Any]) -> None:
        self.i = 0
        self.t_start = time.time()

    def step(self) -> dict[str, Any]:
        self._nap()
        self.i += 1
        return {"score": self.config["x"], "t": time.time(), "t_start": self.t_start}

    def save_checkpoint(self, checkpoint_dir: Any) -> None:
        _save_count(checkpoint_dir, self.i)

    def load_checkpoint(self, checkpoint_dir: Any) -> None:
        self.i = _load_count(checkpoint_dir)

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        self.i = 0
        self.t_start = time.time()
        return True


class CurveSteps(_Steps):
    """Follows the learning curve ``config["curves"][config["index"]]``."""

    def setup(self, config: dict[str, Any]) -> None:
        self.i = 0

    def step(self) -> dict[str, Any]:
        self._nap()
        self.i += 1
        curve = self.config["curves"][self.config["index"]]
        return {"value": curve_value(curve, self.i), "index": self.config["index"]}

    def save_checkpoint(self, checkpoint_dir: Any) -> None:
        _save_count(checkpoint_dir, self.i)

    def load_checkpoint(self, checkpoint_dir: Any) -> None:
        self.i = _load_count(checkpoint_dir)


class PBTToySteps(_Steps):
    """``PBTBenchmarkExample``'s dynamics (``pbt_toy_step``), without ``reset_config``:
    an exploit sets up a new actor. Logs its events for the exploit latency (see
    ``_sched_common``)."""

    def setup(self, config: dict[str, Any]) -> None:
        self.lr = config["lr"]
        self.accuracy = 0.0
        self._log("setup")

    def step(self) -> dict[str, Any]:
        self._nap()
        self.accuracy, metrics = pbt_toy_step(self.accuracy, self.lr)
        self._log("result", self.iteration + 1)
        return metrics

    def save_checkpoint(self, checkpoint_dir: Any) -> None:
        with open(os.path.join(checkpoint_dir, "state.json"), "w") as fh:
            json.dump({"accuracy": self.accuracy, "lr": self.lr, "saved_by": self.trial_id}, fh)
        self._log("save")

    def load_checkpoint(self, checkpoint_dir: Any) -> None:
        with open(os.path.join(checkpoint_dir, "state.json")) as fh:
            state = json.load(fh)
        self.accuracy = state["accuracy"]
        self._log("load", source=state["saved_by"])

    def _log(self, event: str, iteration: int | None = None, source: str = "") -> None:
        it = self.iteration if iteration is None else iteration
        EventLog.write(self.config["log_dir"], self.trial_id, event, it, source)


class PBTToyResetSteps(PBTToySteps):
    """:class:`PBTToySteps` with its ``reset_config`` (returns True: the actor stays)."""

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        self.lr = new_config["lr"]
        self._log("reset")
        return True
