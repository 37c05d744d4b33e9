"""PBT's *explore* step: how a donor's config is mutated, one key of
``hyperparam_mutations`` at a time (Ray Tune's rules, drawing from the scheduler's own
seeded RNG so that a run's schedule can be replayed)."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from orchestrator.errors import ConfigError

__all__ = ["check_mutations", "explore", "mutate"]

_MISSING = object()


def check_mutations(mutations: Any, path: str = "") -> None:
    if not isinstance(mutations, Mapping):
        raise ConfigError(f"hyperparam_mutations{path} must be a dict, got {mutations!r}")
    for key, spec in mutations.items():
        where = f"hyperparam_mutations{path}[{key!r}]"
        if isinstance(spec, Mapping):
            check_mutations(spec, f"{path}[{key!r}]")
        elif isinstance(spec, (list, tuple)):
            if not spec:
                raise ConfigError(f"{where} is an empty list: give the values to choose from")
        elif not (callable(getattr(spec, "sample", None)) or callable(spec)):
            raise ConfigError(
                f"{where} must be a list or tuple of values, a search-space domain (with "
                f".sample(rng)), a function of no arguments, or a dict of these; got {spec!r}"
            )


def mutate(
    config: Mapping[str, Any],
    mutations: Mapping[str, Any],
    rng: random.Random,
    resample_probability: float,
    perturbation_factors: Sequence[float],
) -> dict[str, Any]:
    """A mutated deep copy of ``config`` (see :meth:`PBT.explore` for the rules)."""
    new = copy.deepcopy(dict(config))
    for key, spec in mutations.items():
        old = config.get(key, _MISSING)
        if isinstance(spec, Mapping):
            inner = old if isinstance(old, Mapping) else {}
            new[key] = mutate(inner, spec, rng, resample_probability, perturbation_factors)
        elif isinstance(spec, (list, tuple)):
            if rng.random() < resample_probability or old not in spec:
                new[key] = copy.deepcopy(rng.choice(spec))
            else:
                index = spec.index(old) + rng.choice((-1, 1))
                new[key] = copy.deepcopy(spec[min(max(index, 0), len(spec) - 1)])
        else:
            if rng.random() < resample_probability or not isinstance(old, (int, float)):
                sample = getattr(spec, "sample", None)
                value = sample(rng) if callable(sample) else spec()
            else:
                value = old * rng.choice(perturbation_factors)
            if isinstance(old, bool):
                value = bool(value)
            elif isinstance(old, int) and isinstance(value, (int, float)):
                value = int(round(value))
            new[key] = value
    return new


def explore(
    config: Mapping[str, Any],
    mutations: Mapping[str, Any],
    rng: random.Random,
    resample_probability: float,
    perturbation_factors: Sequence[float],
    custom_explore_fn: Callable[[dict[str, Any]], Mapping[str, Any]] | None,
) -> dict[str, Any]:
    """:func:`mutate`, then ``custom_explore_fn`` on the result (it must return a dict)."""
    new_config = mutate(config, mutations, rng, resample_probability, perturbation_factors)
    if custom_explore_fn is not None:
        explored = custom_explore_fn(new_config)
        if not isinstance(explored, Mapping):
            raise ConfigError(
                f"custom_explore_fn must return the new config (a dict), got {explored!r}"
            )
        new_config = dict(explored)
    return new_config
