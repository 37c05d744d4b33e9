"""Checks of the values users pass, shared by every public entry point: each mistake is
a :class:`~orchestrator.errors.ConfigError` that names where it was made."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from orchestrator.errors import ConfigError

__all__ = [
    "check_failures",
    "check_int",
    "check_resources",
    "check_seconds",
    "check_sendable",
]


def check_failures(value: Any, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise ConfigError(
            f"{where}: max_failures must be an int >= -1 (-1: no limit), got {value!r}"
        )


def check_int(value: Any, what: str, where: str, least: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{where}: {what} must be an int >= {least}, got {value!r}")


def check_seconds(value: Any, what: str, where: str) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{where}: {what} must be a number of seconds >= 0, got {value!r}")


def check_resources(resources: Mapping[str, float] | None, where: str) -> dict[str, float]:
    """``resources`` as names to floats (``None``: one CPU); ``where`` names the call."""
    if resources is None:
        return {"cpu": 1.0}
    if not isinstance(resources, Mapping):
        raise ConfigError(
            f"{where}: resources must be a dict like {{'cpu': 0.5}}, got {resources!r}"
        )
    checked: dict[str, float] = {}
    for key, amount in resources.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"{where}: resource names must be str, got {key!r}")
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            raise ConfigError(f"{where}: resource {key!r} must be a number >= 0, got {amount!r}")
        checked[key] = float(amount)
    return checked


def check_sendable(config: Mapping[str, Any], trial_id: str) -> None:
    """The config goes to a worker process (pickled): name the key that cannot."""
    import cloudpickle

    try:
        cloudpickle.dumps(config)
        return
    except Exception as err:
        path, cause = _unpicklable(config, ()) or ((), err)
    where = ".".join(path) or "(the whole config)"
    raise ConfigError(
        f"trial {trial_id}: config key {where!r} cannot be sent to a worker process "
        f"({type(cause).__name__}: {cause}); put only picklable values in the config and "
        "create locks, clients or open files in the trainable's setup()"
    ) from cause


def _unpicklable(value: Any, path: tuple[str, ...]) -> tuple[tuple[str, ...], Exception] | None:
    import cloudpickle

    if isinstance(value, Mapping):
        for key, item in value.items():
            found = _unpicklable(item, (*path, str(key)))
            if found is not None:
                return found
        return None
    try:
        cloudpickle.dumps(value)
    except Exception as err:
        return path, err
    return None
