"""How result and config values become JSON, CSV cells, TensorBoard scalars and hparams.

Everything here is pure and total: any value a trainable reports (numpy scalars and
arrays, sets, objects with no JSON form, dicts with tuple keys) has a representation,
so a strange value never costs a trial its logs. numpy is never imported: its values are
recognised by their ``dtype`` and converted with ``.item()`` / ``.tolist()``.
``flatten`` and ``SEP`` are :mod:`orchestrator.core.results`'s (the dashboard and
``ls``/``plot`` name nested keys the same way).
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from typing import Any

from orchestrator.core.results import SEP, flatten, json_spelling

__all__ = ["SEP", "dumps", "flatten", "hparam_value", "scalar_value", "jsonable"]

_MAX_DEPTH = 64


def jsonable(value: Any) -> Any:
    """The ``default=`` of :func:`json.dumps`: numpy values as Python ones, sets as
    lists, anything else as its ``repr``."""
    if hasattr(value, "dtype") and hasattr(value, "tolist"):
        return value.item() if getattr(value, "ndim", 1) == 0 else value.tolist()
    if isinstance(value, (set, frozenset)):
        try:
            return sorted(value)
        except TypeError:
            return [jsonable(v) for v in value]
    if isinstance(value, (tuple, list)):
        return list(value)
    return repr(value)


def dumps(obj: Any, *, indent: int | None = None) -> str:
    """Standard JSON text for ``obj``, never raising. A NaN or infinite float is written
    as the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``: strict JSON readers
    refuse the bare ``NaN`` Python writes, ``null`` would lose which one it was, and
    ``float()`` and ``pandas.to_numeric`` read these strings back as the floats."""
    try:
        return json.dumps(
            obj, default=jsonable, indent=indent, sort_keys=indent is not None, allow_nan=False
        )
    except (TypeError, ValueError):  # keys json cannot take, a non-finite float, a cycle
        clean = _sanitize(obj, 0)  # every key a str now: sortable
        return json.dumps(clean, indent=indent, sort_keys=indent is not None, allow_nan=False)


def _sanitize(obj: Any, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return repr(obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else json_spelling(obj)
    if isinstance(obj, (str, int)) or obj is None:  # bool is an int
        return obj
    if isinstance(obj, Mapping):
        return {_key(k): _sanitize(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_sanitize(v, depth + 1) for v in obj]
    converted = jsonable(obj)  # numpy values (a NaN among them), sets
    return converted if isinstance(converted, str) else _sanitize(converted, depth + 1)


def _key(key: Any) -> str:
    return key if isinstance(key, str) else repr(key)


def scalar_value(value: Any) -> float | None:
    """The value as a TensorBoard scalar, or ``None`` if it is not a real number.

    ints and floats (and numpy's) qualify, finite or not; bools (and numpy's) do not.
    """
    kind = type(value)
    if kind is float or kind is int:
        return float(value)
    if kind is bool or not isinstance(value, numbers.Real) or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def hparam_value(value: Any) -> bool | int | float | str:
    """A config value as TensorBoard's hparams accept it: bool, int, float or str."""
    if hasattr(value, "dtype") and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else str(number)
    return dumps(value) if isinstance(value, (list, tuple, Mapping)) else str(value)
