"""Random search with grids expanded: the default searcher, Ray Tune's semantics.

``num_samples`` repeats of the whole grid, every grid point in order within a repeat,
the random domains drawn fresh for each trial. It learns nothing from results, so its
state is just where it is: the RNG's state and the number of configs suggested.
"""

from __future__ import annotations

import random
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.search.searcher import Searcher, check_seed, check_setup, checked_state
from orchestrator.search.space import Path, SearchSpace

_STATE_KIND = "RandomSearch"
_STATE_VERSION = 1


class RandomSearch(Searcher):
    """``num_samples`` x every grid point, random domains drawn from a seeded RNG."""

    def __init__(self, seed: int | None = None) -> None:
        check_seed("RandomSearch", seed)
        self._seed = seed
        self._space: SearchSpace | None = None
        self._grid: list[dict[Path, Any]] = []
        self._rng = random.Random()
        self._total = 0
        self._suggested = 0

    def setup(
        self,
        space: SearchSpace,
        *,
        metric: str | None,
        mode: str | None,
        num_samples: int,
        seed: int | None,
    ) -> None:
        check_setup("RandomSearch", metric, mode, num_samples, seed)
        self._space = space
        self._grid = space.grid_points
        self._total = num_samples * len(self._grid)
        self._rng = random.Random(self._seed if self._seed is not None else seed)
        self._suggested = 0

    def _set_up(self) -> SearchSpace:
        if self._space is None:
            raise RuntimeError("RandomSearch: call setup() first")
        return self._space

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        space = self._set_up()
        if self._suggested >= self._total:
            return None
        point = self._grid[self._suggested % len(self._grid)]
        config = space.sample(self._rng, point)
        self._suggested += 1
        return config

    def get_state(self) -> dict[str, Any]:
        self._set_up()
        return {
            "kind": _STATE_KIND,
            "version": _STATE_VERSION,
            "rng": self._rng.getstate(),
            "suggested": self._suggested,
            "total": self._total,
        }

    def set_state(self, state: Any) -> None:
        self._set_up()
        state = checked_state(_STATE_KIND, state, _STATE_VERSION)
        if state["total"] != self._total:
            raise ConfigError(
                f"RandomSearch: the state is from a sweep of {state['total']} trials, this one "
                f"has {self._total}; resume with the same space and num_samples"
            )
        self._rng.setstate(state["rng"])
        self._suggested = int(state["suggested"])
