"""What names a trainable and a config for matching (see :mod:`orchestrator.core.identity`):
plain functions the spec uses too, when it records a trial's trainable."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["config_identity", "trainable_identity"]


def trainable_identity(trainable: Any) -> str:
    """``module:qualname`` of a trainable class, or of the function a function
    trainable wraps (through ``functools.partial`` too)."""
    target = trainable
    if isinstance(trainable, type) and getattr(trainable, "wraps_function", False):
        target = getattr(trainable, "function", None) or trainable  # the wrapped function
    while not hasattr(target, "__qualname__") and hasattr(target, "func"):
        target = target.func
    module = getattr(target, "__module__", None) or "?"
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{module}:{name}"


def config_identity(config: Mapping[str, Any]) -> str:
    """The config as the journal stores it (JSON: numpy scalars as numbers, other
    objects as their ``repr``), with sorted keys, so that equal configs compare equal
    whatever their key order."""
    from orchestrator.core.json_codec import dumps

    try:
        return json.dumps(json.loads(dumps(dict(config))), sort_keys=True)
    except (TypeError, ValueError):  # keys JSON cannot hold: compare their repr
        return repr(sorted((repr(k), repr(v)) for k, v in config.items()))
