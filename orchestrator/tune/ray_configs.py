"""Ray's own config objects given to the facade: ``ray.train.RunConfig``,
``CheckpointConfig``, ``FailureConfig`` (and ``ray.tune``'s, ``ray.air``'s, and a
``ray.tune.TuneConfig``) become the facade's, field by field.

Tune's documentation wrote ``from ray.train import RunConfig, CheckpointConfig`` for
years (they were Tune's classes until Ray 2.x split them), so scripts pass them to a
``Tuner``; Ray 2.60's own Tune fails on them at ``fit()``. Here a field the user set
(one that differs from what the Ray class sets by itself) is copied into the facade's
class, whose checks then run as if the user had written it; a Ray Train field a Tune
run has no use for (``worker_runtime_env``...) is refused, naming it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, TypeVar

from orchestrator.tune.error import unsupported

__all__ = ["as_ours"]

T = TypeVar("T")

#: The name ``ray.train.RunConfig()`` gives itself when none is given.
_TRAIN_AUTO_NAME = re.compile(r"^ray_train_run-\d{4}-\d\d-\d\d_")


def is_rays(value: Any, cls: type) -> bool:
    """``value`` is Ray's class of the same name (from ``ray.train``, ``ray.tune``,
    ``ray.air``...), told without importing Ray."""
    kind = type(value)
    return (
        kind.__name__ == cls.__name__
        and (kind.__module__ or "").split(".")[0] == "ray"
        and dataclasses.is_dataclass(value)
    )


def as_ours(value: Any, cls: type[T]) -> Any:
    """``value`` as the facade's ``cls`` if it is Ray's class of that name; else as is
    (the caller's checks judge it)."""
    if value is None or isinstance(value, cls) or not is_rays(value, cls):
        return value
    where = f"{type(value).__module__}.{cls.__name__}"
    try:
        untouched: Any = type(value)()
    except Exception:  # a Ray class needing arguments: every field counts as set
        untouched = None
    ours = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    given: dict[str, Any] = {}
    for field in dataclasses.fields(value):
        got = getattr(value, field.name)
        if field.name.startswith("_") or _unset(got, untouched, field.name):
            continue
        if field.name not in ours:
            raise unsupported(
                f"{where}({field.name}=...) (a Ray Train setting)",
                f"drop it: a Tune run has no use for it (or use tune.{cls.__name__})",
            )
        given[field.name] = got
    return cls(**given)


def _unset(got: Any, untouched: Any, name: str) -> bool:
    if isinstance(got, str) and got == "DEPRECATED":
        return True
    if name == "name" and isinstance(got, str) and _TRAIN_AUTO_NAME.match(got):
        return True
    if untouched is None:
        return False
    try:
        return bool(got == getattr(untouched, name))
    except Exception:
        return False
