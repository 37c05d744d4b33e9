"""Tune's trainables as the engine hosts them, without Ray: a tune.Trainable's methods
and attributes keep Tune's meaning (dict checkpoints, SHOULD_CHECKPOINT, done, the
iteration count, with_parameters objects in setup), a function gets its context."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from orchestrator.core.wire import REPORTED_CHECKPOINT
from orchestrator.tune import Trainable, result
from orchestrator.tune.adapters import engine_trainable, unwrap, with_parameters
from orchestrator.tune.context import RunInfo


class Counter(Trainable):
    def setup(self, config: dict[str, Any], data: list[int] | None = None) -> None:
        self.count = 0
        self.data = data
        self.seen_iterations: list[int] = []

    def step(self) -> dict[str, Any]:
        self.seen_iterations.append(self.iteration)
        self.count += 1
        out: dict[str, Any] = {"count": self.count, "trial": self.trial_id}
        if self.count == 2:
            out[result.SHOULD_CHECKPOINT] = True
        if self.count == 3:
            out["done"] = True
        return out

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"count": self.count}

    def load_checkpoint(self, checkpoint: Any) -> None:
        self.count = checkpoint["count"]

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        return True


INFO = RunInfo("exp", "/tmp/exp", "Counter")


def hosted(cls: Any, params: dict[str, Any] | None = None, config: Any = None) -> Any:
    """The engine's trainable made and set up the way the trial actor does it."""
    engine = engine_trainable(cls, INFO, params or {})()
    engine.config, engine.trial_id, engine.iteration = dict(config or {}), "abc_00001", 0
    engine.setup(engine.config)
    return engine


def step(engine: Any) -> dict[str, Any]:
    out: dict[str, Any] = engine.step()
    engine.iteration += 1  # the actor counts it
    return out


def test_a_tune_trainable_keeps_tunes_meaning(tmp_path: Path) -> None:
    engine = hosted(Counter)
    first = step(engine)
    assert first["count"] == 1 and first["trial"] == "abc_00001" and first["done"] is False
    assert {"time_since_restore", "iterations_since_restore", "pid", "date"} <= set(first)
    second = step(engine)
    assert second[REPORTED_CHECKPOINT] is True and result.SHOULD_CHECKPOINT not in second
    engine.save_checkpoint(str(tmp_path))
    assert os.listdir(tmp_path) == ["_dict_checkpoint.pkl"]
    assert step(engine)["done"] is True
    assert engine.inner.seen_iterations == [0, 1, 2]
    engine.load_checkpoint(str(tmp_path))
    assert engine.inner.count == 2
    assert engine.reset_config({"lr": 1}) and engine.inner.config == {"lr": 1}
    assert engine.inner.trial_name == "Counter_abc_00001"


def test_with_parameters_objects_reach_setup_without_ray() -> None:
    user, params, _ = unwrap(with_parameters(Counter, data=[1, 2, 3]), put=False)
    assert hosted(user, params).inner.data == [1, 2, 3]


def test_a_function_gets_its_objects_and_context() -> None:
    from orchestrator.actor.function import FunctionTrainable, wrap_function
    from orchestrator.tune import get_context, report

    def train(config: dict[str, Any], data: Any = None) -> None:
        context = get_context()
        report({"data": data, "id": context.get_trial_id(), "name": context.get_trial_name()})

    user, params, _ = unwrap(with_parameters(train, data="big"), put=False)
    function = engine_trainable(user, RunInfo("exp", "/tmp/exp", "train"), params)
    trainable = wrap_function(function)()
    assert isinstance(trainable, FunctionTrainable)
    trainable.config, trainable.trial_id, trainable.iteration = {}, "abc_00002", 0
    try:
        out = trainable.step()
    finally:
        trainable.cleanup()
    assert out["data"] == "big" and out["id"] == "abc_00002" and out["name"] == "train_abc_00002"
    assert out["done"] is False and out["iterations_since_restore"] == 1
