"""Ray Train's names inside a trial the facade runs: ``ray.train.report``,
``ray.train.get_checkpoint`` and ``ray.train.get_context`` are the facade's
``tune.report``, ``tune.get_checkpoint`` and ``tune.get_context`` there.

Tune's documentation long mixed ``ray.train`` and ``ray.tune`` names, so many scripts
call ``ray.train.report`` in a Tuner's trial (Ray 2.60's Tune now raises a
``DeprecationWarning`` there). :func:`install` puts a dispatcher in place of each of
the three in the ``ray.train`` module of a trial's process: inside one of the facade's
trials it calls the facade's function, anywhere else Ray Train's own, so a real Ray
Train run (its workers are other processes, where no facade trial runs) is unchanged.
The dispatchers carry Ray's names (``ray.train.report``), so a function that refers to
them pickles by reference as before. Nothing is installed in a driver: only when a
trial starts, and when a Ray worker imports the facade's adapters (before it unpickles
a trainable, whose ``from ray.train import report`` is looked up then).
"""

from __future__ import annotations

import functools
import importlib.abc
import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

from orchestrator.tune import context as ctx

__all__ = ["in_ray_worker", "install"]

_NAMES: dict[str, Callable[..., Any]] = {
    "report": ctx.report,
    "get_checkpoint": ctx.get_checkpoint,
    "get_context": ctx.get_context,
}
_MARK = "_trialflow_original"


def install() -> None:
    """Put the dispatchers in ``ray.train`` now if it is imported, else as soon as it is
    (importing it here would cost a trial's process seconds of CPU for nothing)."""
    train = sys.modules.get("ray.train")
    if train is not None:
        _patch(train)
    elif not any(isinstance(f, _WhenImported) for f in sys.meta_path):
        sys.meta_path.insert(0, _WhenImported())


def _patch(train: ModuleType) -> None:
    for name, ours in _NAMES.items():
        original = getattr(train, name, None)
        if original is None or hasattr(original, _MARK):
            continue
        setattr(train, name, _dispatcher(original, ours))


class _WhenImported(importlib.abc.MetaPathFinder):
    """Finds ``ray.train`` as the other finders do, and patches it once it has run."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != "ray.train":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchAfter(spec.loader)
                return spec
        return None


class _PatchAfter(importlib.abc.Loader):
    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        created: ModuleType | None = self._loader.create_module(spec)
        return created

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _patch(module)

    def __getattr__(self, name: str) -> Any:  # the file loader's other methods
        return getattr(self._loader, name)


def _dispatcher(original: Callable[..., Any], ours: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        if ctx.current() is None:  # not in one of the facade's trials: Ray Train's own
            return original(*args, **kwargs)
        return ours(*args, **kwargs)

    setattr(dispatch, _MARK, original)
    return dispatch


def in_ray_worker() -> bool:
    """This process is a Ray worker (never a driver); told without connecting to Ray."""
    ray = sys.modules.get("ray")
    if ray is None:
        return False
    # Ray has no public way to ask without starting or joining a cluster.
    worker = getattr(getattr(getattr(ray, "_private", None), "worker", None), "global_worker", None)
    return getattr(worker, "mode", None) == getattr(ray, "WORKER_MODE", object())
