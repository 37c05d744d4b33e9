"""The engine on a fake Ray (``tests/support/fakeray.py``): no Ray starts in this folder.

``fake_ray`` (``tests/conftest.py``) is an in-process Ray of one 4-CPU node (the real
session cluster's head has 4 CPUs too); ``orchestrator(...)`` builds an ``Orchestrator``
that runs on it, with the same arguments and defaults as a real one; ``runtime(...)``
builds the loop's record of one trial for the tests that drive the outcomes or the
executor directly.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, Trial
from orchestrator.core.spec import policy_for
from orchestrator.engine.trial_runtime import TrialRuntime

from ..support.fake_engine import MakeOrchestrator, MakeRuntime
from ..support.fakeray import FakeRay
from ..support.trainables import Counter

#: Ray's driver-side calls the engine makes; on the fake Ray none may be made.
RAY_CALLS = (
    "init",
    "kill",
    "nodes",
    "available_resources",
    "cluster_resources",
    "get_runtime_context",
)


@pytest.fixture(autouse=True)
def no_real_ray(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A tripwire: a call of the real Ray from a test here fails the test (the engine
    would have logged and retried it, hiding a path that bypasses its backend)."""
    import ray

    called: list[str] = []

    def tripwire(name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            called.append(name)
            raise AssertionError(f"ray.{name}() called on the fake Ray")

        return call

    for name in RAY_CALLS:
        monkeypatch.setattr(ray, name, tripwire(name))
    yield called
    assert called == [], f"the engine called the real Ray: {called}"


@pytest.fixture
def orchestrator(fake_ray: FakeRay) -> MakeOrchestrator:
    """``Orchestrator(**kwargs)`` on the fake Ray."""

    def make(**kwargs: Any) -> Orchestrator:
        return Orchestrator(_ray_backend=fake_ray, **kwargs)

    return make


@pytest.fixture
def runtime(tmp_path: Path) -> MakeRuntime:
    """``runtime(trainable=Counter, **add_trial options)``: a PENDING trial's record,
    with its public handle (as ``add_trial`` builds it, without an experiment)."""
    orch = Orchestrator(storage=tmp_path, name="records", progress=False, loggers=[])
    made = itertools.count()

    def make(trainable: Any = Counter, **options: Any) -> TrialRuntime:
        options.setdefault("trial_id", f"t{next(made)}")
        spec = orch.trial_spec(trainable, **options)
        rt = TrialRuntime(spec, policy_for(spec, orch.settings))
        Trial(rt, lambda: None)
        return rt

    return make


@pytest.fixture
def wandb_offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """W&B offline and quiet; its service process ended after the test (the tracker
    tests use it for every test of theirs)."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    yield
    if "wandb" in sys.modules:
        sys.modules["wandb"].teardown()
