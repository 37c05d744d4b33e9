"""``tune.with_resources`` as Ray Tune's: a function stays a function (Ray's decorator
and anything else that takes one still do), its resources ride along as an attribute."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.tune import Trainable, with_parameters, with_resources
from orchestrator.tune.adapters import unwrap
from orchestrator.tune.error import TuneUnsupported


def train(config: dict[str, Any]) -> None:
    return None


def test_a_function_stays_a_function_that_ray_remote_takes() -> None:
    import ray

    wrapped = with_resources(train, {"cpu": 2})
    assert wrapped is train and callable(wrapped)
    remote = ray.remote(wrapped)  # Ray's decorator takes functions and classes only
    assert hasattr(remote, "remote")
    assert unwrap(wrapped, put=False) == (train, {}, {"cpu": 2})


def test_the_outermost_resources_win_and_with_parameters_keeps_them() -> None:
    def f(config: dict[str, Any], data: int = 0) -> None:
        return None

    inner = with_resources(f, {"cpu": 1})
    outer = with_resources(with_parameters(inner, data=3), lambda c: {"cpu": c["n"]})
    user, params, resources = unwrap(outer, put=False)
    assert user is f and params == {"data": 3}
    assert resources({"n": 4}) == {"cpu": 4}


def test_a_bound_method_is_wrapped_in_a_function() -> None:
    class Holder:
        def run(self, config: dict[str, Any]) -> int:
            return int(config["a"])

    wrapped = with_resources(Holder().run, {"cpu": 1})
    assert wrapped.__name__ == "run" and wrapped({"a": 5}) == 5
    assert unwrap(wrapped, put=False)[2] == {"cpu": 1}


def test_a_class_is_wrapped_and_bad_resources_are_refused() -> None:
    class Small(Trainable):
        def step(self) -> dict[str, Any]:
            return {}

    assert unwrap(with_resources(Small, {"cpu": 1}), put=False) == (Small, {}, {"cpu": 1})
    with pytest.raises(TuneUnsupported, match="with_resources"):
        with_resources(train, 3)
