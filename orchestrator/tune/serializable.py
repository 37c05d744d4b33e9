"""A trainable must pickle: it runs in Ray's workers. Checked when the ``Tuner`` is
built, as on Tune, so a function that captured a lock (a client, an open file...) is
refused at once, naming what it captured, rather than when the first trial starts.

Only the user's function or class is pickled here: ``with_parameters`` objects go to
Ray's object store by their own path. The check costs one pickling, which the run
would do anyway.
"""

from __future__ import annotations

import inspect
from typing import Any

import cloudpickle

from orchestrator.errors import ConfigError
from orchestrator.tune.adapters import trainable_name, unwrap

__all__ = ["TrainableNotSerializable", "check_serializable"]


class TrainableNotSerializable(ConfigError, TypeError):
    """The trainable cannot be pickled (Tune raises a ``TypeError``; so is this)."""


def _pickles(value: Any) -> bool:
    try:
        cloudpickle.dumps(value)
    except Exception:
        return False
    return True


def _culprit(function: Any) -> str | None:
    """The name of a captured variable (closure cell or global) that does not pickle."""
    if not inspect.isfunction(function):
        return None
    try:
        captured = inspect.getclosurevars(function)
    except (TypeError, ValueError):
        return None
    for name, value in {**captured.nonlocals, **captured.globals}.items():
        if not inspect.ismodule(value) and not _pickles(value):
            return f"{name!r} ({type(value).__name__})"
    return None


def check_serializable(trainable: Any) -> None:
    """Refuse a trainable that does not pickle, in one line naming what it captured."""
    user, _, _ = unwrap(trainable, put=False)
    try:
        cloudpickle.dumps(user)
    except Exception as err:
        culprit = _culprit(user)
        what = f"it captures {culprit}, which" if culprit else "it"
        raise TrainableNotSerializable(
            f"The provided trainable {trainable_name(user)!r} is not serializable, which is a "
            f"requirement since the trainable is sent to Ray's workers: {what} cannot be "
            f"pickled ({err}); create such objects inside the trainable"
        ) from None
