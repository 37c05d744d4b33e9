"""Stop criteria: when a trial has trained enough.

A criterion is a dict ``{metric: threshold}`` (stop once ``result[metric] >= threshold``
for any of them) or a callable ``(trial_id, result) -> bool``. Both become a picklable
:class:`StopCondition`, so the same object decides in the driver and, when an actor runs
a few steps ahead, inside the actor.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.errors import ConfigError

StopSpec = Mapping[str, float] | Callable[[str, Mapping[str, Any]], bool] | None


class StopCondition:
    """``condition(result) -> bool`` for one trial."""

    __slots__ = ("trial_id", "thresholds", "predicate")

    def __init__(self, trial_id: str, spec: StopSpec, *, where: str | None = None) -> None:
        """``where`` names the call in error messages (default: the trial)."""
        where = where or f"trial {trial_id}"
        self.trial_id = trial_id
        self.thresholds: tuple[tuple[str, float], ...] = ()
        self.predicate: Callable[[str, Mapping[str, Any]], bool] | None = None
        if spec is None:
            return
        if callable(spec):
            self.predicate = spec
            return
        if not isinstance(spec, Mapping):
            raise ConfigError(
                f"{where}: stop must be a dict of metric: threshold or a callable "
                f"(trial_id, result) -> bool, got {type(spec).__name__}"
            )
        pairs: list[tuple[str, float]] = []
        for key, value in spec.items():
            if not isinstance(key, str):
                raise ConfigError(
                    f"{where}: stop keys must be metric names (str), got {key!r} "
                    f"of type {type(key).__name__}"
                )
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ConfigError(
                    f"{where}: stop threshold for {key!r} must be a number, got {value!r}"
                )
            pairs.append((key, float(value)))
        self.thresholds = tuple(pairs)

    def for_trial(self, trial_id: str) -> StopCondition:
        """This criterion, checked once already, for the trial ``trial_id``."""
        bound = StopCondition.__new__(StopCondition)
        bound.__setstate__((trial_id, self.thresholds, self.predicate))
        return bound

    @property
    def iteration_limit(self) -> int | None:
        """The ``training_iteration`` threshold, if the criterion has one."""
        for key, value in self.thresholds:
            if key == "training_iteration":
                return int(value) if value == int(value) else int(value) + 1
        return None

    @property
    def metrics(self) -> tuple[str, ...]:
        """The result keys the thresholds read (``training_iteration`` is always there)."""
        return tuple(k for k, _ in self.thresholds if k != "training_iteration")

    def thresholds_met(self, result: Mapping[str, Any]) -> bool:
        """Whether a threshold holds on ``result``, without asking the stop function:
        safe on a result seen before (a checkpoint's), where a stateful function (a
        plateau stopper) would count it twice."""
        for key, threshold in self.thresholds:
            value = result.get(key)
            if type(value) is int or type(value) is float:  # the common case, fast
                if value >= threshold:
                    return True
            elif isinstance(value, numbers.Real) and float(value) >= threshold:
                return True
        return False

    def __call__(self, result: Mapping[str, Any]) -> bool:
        if self.thresholds_met(result):
            return True
        if self.predicate is not None:
            return bool(self.predicate(self.trial_id, result))
        return False

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.trial_id, self.thresholds, self.predicate)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.trial_id, self.thresholds, self.predicate = state
