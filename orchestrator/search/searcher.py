"""The protocol between a sweep and the algorithm that picks its trials' configs.

Sans-IO on purpose: a searcher never waits on anything but its own computation, so the
sweep can call it from a worker thread (model-based searchers are slow) and a test can
drive it with a plain loop. The sweep makes every call from that one thread, one at a
time, and counts the trials itself.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.search.space import SearchSpace

MODES = ("min", "max")


def check_setup(
    owner: str, metric: str | None, mode: str | None, num_samples: int, seed: int | None
) -> None:
    """Reject setup arguments that no searcher can use, naming the searcher."""
    if metric is not None and not isinstance(metric, str):
        raise ConfigError(f"{owner}: metric must be a str or None, got {metric!r}")
    if mode is not None and mode not in MODES:
        raise ConfigError(f"{owner}: mode must be 'min', 'max' or None, got {mode!r}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
        raise ConfigError(f"{owner}: num_samples must be an int >= 1, got {num_samples!r}")
    check_seed(owner, seed)


def check_seed(owner: str, seed: int | None) -> None:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ConfigError(f"{owner}: seed must be an int or None, got {seed!r}")


def checked_state(owner: str, state: Any, version: int) -> Mapping[str, Any]:
    """``state`` when it is what ``owner``'s ``get_state`` writes (a mapping whose
    ``kind`` is the searcher's name and whose ``version`` is ``version``), else a
    ConfigError: a sweep resumed with another searcher must not half-load its state."""
    if (
        not isinstance(state, Mapping)
        or state.get("kind") != owner
        or state.get("version") != version
    ):
        article = "an" if owner[0] in "AEIOU" else "a"
        raise ConfigError(
            f"{owner}: the state is not {article} {owner} state (version {version}); resume "
            "with the searcher the sweep was started with"
        )
    return state


class Searcher(abc.ABC):
    """Suggests configs for new trials and learns from their results.

    ``get_state``/``set_state`` let a sweep survive a driver crash: a fresh searcher
    built with the same arguments, set up the same way and given the state, suggests
    exactly what the old one would have suggested next.
    """

    @abc.abstractmethod
    def setup(
        self,
        space: SearchSpace,
        *,
        metric: str | None,
        mode: str | None,
        num_samples: int,
        seed: int | None,
    ) -> None:
        """Called once, before the first suggest. ``seed`` is the sweep's, the fallback
        when the searcher was built without one."""

    @abc.abstractmethod
    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        """A config for the new trial ``trial_id``, or ``None``: nothing to suggest now
        (the sweep asks again later, and stops asking after its trial budget)."""

    def on_trial_result(self, trial_id: str, result: Mapping[str, Any]) -> None:
        """An intermediate result of a running trial."""
        return None

    def on_trial_complete(
        self, trial_id: str, result: Mapping[str, Any] | None, error: bool = False
    ) -> None:
        """The trial ended: ``result`` is its last one, ``None`` if it reported none or
        none of its results reported the sweep's metric (nothing to learn from);
        ``error`` says it failed rather than finished."""
        return None

    @abc.abstractmethod
    def get_state(self) -> Any:
        """A picklable snapshot of everything needed to continue after a crash."""

    @abc.abstractmethod
    def set_state(self, state: Any) -> None:
        """Continue from ``get_state()``'s snapshot; called after ``setup``."""
