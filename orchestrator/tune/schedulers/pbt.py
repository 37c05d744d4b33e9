"""Ray Tune's ``PopulationBasedTraining``: trialflow's PBT, with Tune's defaults
(``time_attr="time_total_s"``, ``perturbation_interval=60.0``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.schedulers import PBT
from orchestrator.tune.error import unsupported
from orchestrator.tune.schedulers.base import TuneScheduler

__all__ = ["PopulationBasedTraining"]


def _tune_domains(mutations: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``hyperparam_mutations`` with Tune's ``{"grid_search": [...]}`` read as its values."""
    if mutations is None:
        return None
    out: dict[str, Any] = {}
    for key, spec in mutations.items():
        if isinstance(spec, Mapping) and set(spec) == {"grid_search"}:
            out[key] = list(spec["grid_search"])
        elif isinstance(spec, Mapping):
            out[key] = _tune_domains(spec)
        else:
            out[key] = spec
    return out


class PopulationBasedTraining(TuneScheduler, PBT):
    """PBT with Tune's arguments: ``time_attr``, ``metric``, ``mode``,
    ``perturbation_interval``, ``burn_in_period``, ``hyperparam_mutations``,
    ``quantile_fraction``, ``resample_probability``, ``perturbation_factors``,
    ``custom_explore_fn``, ``log_config``, ``require_attrs``, ``synch``. Its decisions
    follow trialflow's PBT (see README, "Coming from Ray Tune")."""

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        perturbation_interval: float = 60.0,
        burn_in_period: float = 0.0,
        hyperparam_mutations: Mapping[str, Any] | None = None,
        quantile_fraction: float = 0.25,
        resample_probability: float = 0.25,
        perturbation_factors: tuple[float, float] = (1.2, 0.8),
        custom_explore_fn: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None,
        log_config: bool = True,
        require_attrs: bool = True,
        synch: bool = False,
    ) -> None:
        if not require_attrs:
            raise unsupported(
                "PopulationBasedTraining(require_attrs=False)",
                "results must report time_attr and the metric (results without them are "
                "not decided on)",
            )
        del log_config  # every exploit is recorded (scheduler.lineage, the journal)
        super().__init__(
            time_attr=time_attr,
            metric=metric,
            mode=mode,
            perturbation_interval=perturbation_interval,
            burn_in_period=burn_in_period,
            hyperparam_mutations=_tune_domains(hyperparam_mutations),
            quantile_fraction=quantile_fraction,
            resample_probability=resample_probability,
            perturbation_factors=perturbation_factors,
            custom_explore_fn=custom_explore_fn,
            synch=synch,
        )
