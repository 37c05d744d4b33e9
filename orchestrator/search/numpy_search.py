"""Random and grid search drawing from NumPy the way Ray Tune's ``BasicVariantGenerator``
does, so that the same seed gives the same configs in the same order as on Tune.

:class:`~orchestrator.search.RandomSearch` draws from Python's ``random``; this searcher
draws each domain with the NumPy call Tune makes for it (``uniform``, ``integers``,
``choice`` over indices, ``normal``...), with Tune's quantization arithmetic, from the RNG
Tune would use: NumPy's global one when no seed is given (so ``np.random.seed(0)`` at the
top of a script fixes the configs, on Tune and here), ``np.random.default_rng(seed)``
for an int seed, or the Generator/RandomState given. It follows Tune's order too: grid
keys sorted by their path, the first varying fastest, ``num_samples`` repeats of the
grid, each grid point drawing every random domain in the space's order, and
``points_to_evaluate`` first, one repeat each (a point fixes the keys it names; grid keys
it leaves out still expand). ``sample_from`` values are computed after the random
domains are drawn (Tune interleaves them in key order: a ``sample_from`` that draws from
the same global RNG may differ).
"""

from __future__ import annotations

import copy
import itertools
import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from orchestrator.errors import ConfigError
from orchestrator.search.domains import (
    Choice,
    Domain,
    LogUniform,
    QUniform,
    RandInt,
    Uniform,
)
from orchestrator.search.more_domains import (
    LogRandInt,
    QLogRandInt,
    QLogUniform,
    QRandInt,
    QRandN,
    RandN,
)
from orchestrator.search.searcher import Searcher, check_setup, checked_state
from orchestrator.search.space import Path, SearchSpace

__all__ = ["NumpySearch", "draw_like_tune"]

_STATE_KIND = "NumpySearch"
_STATE_VERSION = 1

Rng = Any  # np.random (the module), a Generator or a RandomState


def _integers(rng: Rng, low: int, high: int) -> int:
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(low, high, size=1)[0])
    return int(rng.randint(low, high, size=1)[0])


def _uniform(rng: Rng, low: float, high: float) -> float:
    return float(rng.uniform(low, high, size=1)[0])


def _grid_index(bound: float, q: float, rounding: Any) -> float:
    """Tune's ``Quantized._grid_index``: ``bound``'s index on the grid of q, inwards."""
    if not math.isfinite(bound):
        return bound
    scaled = bound / q
    nearest = round(scaled)
    return nearest if math.isclose(scaled, nearest) else rounding(scaled)


def _int_log(rng: Rng, low: float, high: float) -> int:
    return int(np.floor(np.exp(rng.uniform(np.log(low), np.log(high), size=1))).astype(int)[0])


def draw_like_tune(domain: Domain, rng: Rng) -> Any:
    """One value of ``domain`` drawn with the NumPy calls Ray Tune makes for it."""
    if isinstance(domain, Choice):
        index = rng.choice(np.arange(0, len(domain.values)), size=1)[0]
        return copy.deepcopy(domain.values[int(index)])
    if isinstance(domain, QRandInt):  # QLogRandInt too: Tune's quantized Integer
        q = domain.q
        low = int(_grid_index(domain.low, q, np.ceil))
        high = int(_grid_index(domain.high, q, np.floor)) + (0 if q == 1 else 1)
        if isinstance(domain, QLogRandInt):
            return int(_int_log(rng, low, high) * q)
        return int(_integers(rng, low, high) * q)
    if isinstance(domain, QUniform):  # QLogUniform too: Tune's quantized Float
        fq = domain.q
        flow = _grid_index(domain.low, fq, np.ceil) * fq
        fhigh = _grid_index(domain.high, fq, np.floor) * fq
        if isinstance(domain, QLogUniform):
            value = float(np.exp(rng.uniform(np.log(flow), np.log(fhigh), size=1))[0])
        else:
            value = _uniform(rng, flow, fhigh)
        return float(np.round(np.divide(value, fq)) * fq)
    if isinstance(domain, Uniform):
        return _uniform(rng, domain.low, domain.high)
    if isinstance(domain, LogUniform):
        return float(np.exp(rng.uniform(np.log(domain.low), np.log(domain.high), size=1))[0])
    if isinstance(domain, RandInt):
        return _integers(rng, domain.low, domain.high)
    if isinstance(domain, LogRandInt):
        return _int_log(rng, domain.low, domain.high)
    if isinstance(domain, RandN):
        value = float(rng.normal(domain.mean, domain.sd, size=1)[0])
        if isinstance(domain, QRandN):
            return float(np.round(np.divide(value, domain.q)) * domain.q)
        return value
    raise ConfigError(f"NumpySearch: no NumPy draw for {domain!r}; use RandomSearch for this space")


def _rng_of(seed: Any) -> Rng:
    if seed is None:
        return np.random
    if isinstance(seed, (np.random.Generator, np.random.RandomState)):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(
            "NumpySearch: seed must be None (NumPy's global RNG), an int, or a NumPy "
            f"Generator or RandomState, got {seed!r}"
        )
    return np.random.default_rng(seed)


def _paths(point: Mapping[str, Any], prefix: Path = ()) -> dict[Path, Any]:
    out: dict[Path, Any] = {}
    for key, value in point.items():
        if isinstance(value, Mapping) and value:
            out.update(_paths(value, (*prefix, key)))
        else:
            out[prefix + (key,)] = value
    return out


class NumpySearch(Searcher):
    """Ray Tune's ``BasicVariantGenerator`` sampling (see the module docstring)."""

    def __init__(
        self,
        seed: Any = None,
        *,
        points_to_evaluate: Sequence[Mapping[str, Any]] | None = None,
        constant_grid_search: bool = False,
    ) -> None:
        self._seed_arg = seed
        self._rng: Rng = _rng_of(seed)
        if points_to_evaluate is not None and any(
            not isinstance(p, Mapping) for p in points_to_evaluate
        ):
            raise ConfigError("NumpySearch: points_to_evaluate must be a list of dicts")
        self._points = [_paths(p) for p in points_to_evaluate or []]
        self._constant = bool(constant_grid_search)
        self._space: SearchSpace | None = None
        self._num_samples = 0
        self._sample = 0  # repeats of the grid started
        self._queue: list[dict[str, Any]] = []  # the current repeat's configs not given yet

    def setup(
        self,
        space: SearchSpace,
        *,
        metric: str | None,
        mode: str | None,
        num_samples: int,
        seed: int | None,
    ) -> None:
        check_setup("NumpySearch", metric, mode, num_samples, seed)
        if self._seed_arg is None and seed is not None:
            self._rng = np.random.default_rng(seed)
        for index, point in enumerate(self._points):
            known = {*space.random_domains, *space.grid_domains}
            for path in point:
                if path not in known and not _is_constant(space, path):
                    raise ConfigError(
                        f"NumpySearch: points_to_evaluate[{index}] sets '{'.'.join(path)}', "
                        "which is not a key of the search space; add it to the space"
                    )
        for domain in space.random_domains.values():
            draw_like_tune(domain, np.random.default_rng(0))  # refuses what it cannot draw
        self._space = space
        self._num_samples = num_samples
        self._sample = 0
        self._queue = []

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if not self._queue:
            if self._sample >= self._num_samples:
                return None
            self._queue = self._repeat(self._sample)
            self._sample += 1
        return self._queue.pop(0)

    def _repeat(self, index: int) -> list[dict[str, Any]]:
        """Every config of repeat ``index`` (a point's, for the first repeats), drawn in
        Tune's order."""
        space = self._set_up()
        preset = self._points[index] if index < len(self._points) else {}
        grids = sorted(p for p in space.grid_domains if p not in preset)
        values = [space.grid_domains[p].values for p in grids]
        randoms = [(p, d) for p, d in space.random_domains.items() if p not in preset]
        fixed = {p: v for p, v in preset.items() if p in space.grid_domains}
        fixed.update({p: v for p, v in preset.items() if p in space.random_domains})
        constants = {
            p: v for p, v in preset.items() if p not in space.grid_domains and p not in fixed
        }
        drawn: dict[Path, Any] = {}
        if self._constant:
            drawn = {p: draw_like_tune(d, self._rng) for p, d in randoms}
        configs = []
        for combo in itertools.product(*reversed(values)):  # the first sorted key fastest
            chosen = dict(zip(grids, reversed(combo), strict=True))
            if not self._constant:
                drawn = {p: draw_like_tune(d, self._rng) for p, d in randoms}
            config = space.resolve({**fixed, **chosen, **drawn}, random.Random(0))
            for path, value in constants.items():
                _assign(config, path, copy.deepcopy(value))
            configs.append(config)
        return configs

    def _set_up(self) -> SearchSpace:
        if self._space is None:
            raise RuntimeError("NumpySearch: call setup() first")
        return self._space

    def get_state(self) -> dict[str, Any]:
        self._set_up()
        rng = self._rng
        state = rng.bit_generator.state if isinstance(rng, np.random.Generator) else rng.get_state()
        return {
            "kind": _STATE_KIND,
            "version": _STATE_VERSION,
            "rng": state,
            "sample": self._sample,
            "queue": copy.deepcopy(self._queue),
            "num_samples": self._num_samples,
        }

    def set_state(self, state: Any) -> None:
        self._set_up()
        state = checked_state(_STATE_KIND, state, _STATE_VERSION)
        if state["num_samples"] != self._num_samples:
            raise ConfigError(
                f"NumpySearch: the state is from a sweep of {state['num_samples']} samples, "
                f"this one has {self._num_samples}; resume with the same num_samples"
            )
        if isinstance(self._rng, np.random.Generator):
            self._rng.bit_generator.state = state["rng"]
        else:
            self._rng.set_state(state["rng"])
        self._sample = int(state["sample"])
        self._queue = list(state["queue"])


def _is_constant(space: SearchSpace, path: Path) -> bool:
    """Whether ``path`` names a constant of ``space`` (a point may override one)."""
    try:
        node: Any = space.sample(random.Random(0), space.grid_points[0])
        for key in path:
            node = node[key]
    except (KeyError, TypeError, IndexError):
        return False
    return True


def _assign(config: dict[str, Any], path: Path, value: Any) -> None:
    node = config
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
