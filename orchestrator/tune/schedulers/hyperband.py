"""Ray Tune's ``HyperBandScheduler``: trialflow's HyperBand (trials pause at their
bracket's milestone, freeing their resources; the best resume)."""

from __future__ import annotations

from orchestrator.schedulers import HyperBand
from orchestrator.tune.schedulers.base import TuneScheduler

__all__ = ["HyperBandScheduler"]


class HyperBandScheduler(TuneScheduler, HyperBand):
    """HyperBand with Tune's arguments: ``time_attr`` ("training_iteration"), ``metric``,
    ``mode``, ``max_t`` (81), ``reduction_factor`` (3), ``stop_last_trials`` (True)."""

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        max_t: float = 81,
        reduction_factor: float = 3,
        stop_last_trials: bool = True,
    ) -> None:
        super().__init__(
            time_attr=time_attr,
            metric=metric,
            mode=mode,
            max_t=max_t,
            reduction_factor=reduction_factor,
            stop_last_trials=stop_last_trials,
        )
