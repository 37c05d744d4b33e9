"""PBT's arguments checked, each mistake a :class:`ConfigError` naming the argument and
what it must be (Ray Tune's names and ranges)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.schedulers.base import check_number
from orchestrator.schedulers.mutations import check_mutations

__all__ = ["check_pbt_options"]


def check_pbt_options(
    *,
    perturbation_interval: float,
    burn_in_period: float,
    hyperparam_mutations: Mapping[str, Any] | None,
    quantile_fraction: float,
    resample_probability: float,
    perturbation_factors: tuple[float, ...],
    custom_explore_fn: Callable[[dict[str, Any]], Mapping[str, Any]] | None,
    max_lead: int | None,
) -> None:
    if not hyperparam_mutations and custom_explore_fn is None:
        raise ConfigError(
            "PBT needs hyperparam_mutations or custom_explore_fn (or both): "
            "say how to explore a donor's config"
        )
    check_mutations(hyperparam_mutations or {})
    if custom_explore_fn is not None and not callable(custom_explore_fn):
        raise ConfigError(f"custom_explore_fn must be callable, got {custom_explore_fn!r}")
    check_number("perturbation_interval", perturbation_interval)
    check_number("burn_in_period", burn_in_period, lambda v: 0 <= v < math.inf, "a number >= 0")
    check_number("quantile_fraction", quantile_fraction, lambda v: 0 < v <= 0.5, "in (0, 0.5]")
    check_number("resample_probability", resample_probability, lambda v: 0 <= v <= 1, "in [0, 1]")
    factors = perturbation_factors
    if not isinstance(factors, (tuple, list)) or not factors:
        raise ConfigError(f"perturbation_factors must be a non-empty tuple, got {factors!r}")
    for factor in factors:
        check_number("each of perturbation_factors", factor, math.isfinite, "a finite number")
    if max_lead is not None and (
        isinstance(max_lead, bool) or not isinstance(max_lead, int) or max_lead < 0
    ):
        raise ConfigError(
            f"max_lead must be an int >= 0 (perturbation intervals a trial may run ahead "
            f"of the slowest live trial) or None (no bound), got {max_lead!r}"
        )
