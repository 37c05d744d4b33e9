"""Smaller rules of Tune's: a trainable that cannot be pickled is refused when the
Tuner is built; every callback event is a controller step (on_step_begin/on_step_end)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from orchestrator import tune

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import threading
    from orchestrator import tune
    lock = threading.Lock()
    def train_fn(config):
        with lock:
            tune.report({"score": 1})
    try:
        tune.Tuner(train_fn)
    except TypeError as error:
        print(type(error).__name__, error.__cause__, error)
    """
)


def test_a_script_whose_trainable_uses_a_global_lock_is_refused_at_construction() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.strip()
    assert out.startswith("TrainableNotSerializable None The provided trainable 'train_fn'")
    assert "captures 'lock' (lock)" in out and "\n" not in out


def test_a_closure_capturing_a_lock_is_refused_at_construction() -> None:
    def closure() -> Any:
        local_lock = threading.Lock()

        def trainable(config: dict[str, Any]) -> None:
            local_lock.acquire()

        return trainable

    with pytest.raises(TypeError, match="'trainable' is not serializable") as caught:
        tune.Tuner(closure())  # no Ray needed: refused before the run
    assert "captures 'local_lock' (lock)" in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    with pytest.raises(ValueError, match="captures 'local_lock'"):
        tune.Tuner(tune.with_parameters(closure(), data=[1]))


def three_steps(config: dict[str, Any]) -> None:
    for step in range(3):
        tune.report({"step": step})


class Steps(tune.Callback):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self.calls.append("begin")

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self.calls.append("end")

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: Any, **info: Any
    ) -> None:
        self.calls.append("result")

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.calls.append("complete")


def test_each_event_is_a_step_between_on_step_begin_and_on_step_end(
    tmp_path: Path, ray_local: Any
) -> None:
    steps = Steps()
    tune.Tuner(
        tune.with_resources(three_steps, {"cpu": 0.25}),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="steps", callbacks=[steps], verbose=0
        ),
    ).fit()
    events = [call for call in steps.calls if call not in ("begin", "end")]
    assert events.count("result") == 3 and events[-1] == "complete"
    letters = "".join(call[0] for call in steps.calls)  # begin, end, result, complete
    assert re.fullmatch(r"(b[rc]?e)+", letters), steps.calls  # each event inside a step
