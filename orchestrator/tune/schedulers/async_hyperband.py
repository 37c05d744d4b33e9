"""Ray Tune's ``AsyncHyperBandScheduler`` (``ASHAScheduler``): trialflow's ASHA."""

from __future__ import annotations

from orchestrator.schedulers import ASHA
from orchestrator.tune.schedulers.base import TuneScheduler

__all__ = ["ASHAScheduler", "AsyncHyperBandScheduler"]


class AsyncHyperBandScheduler(TuneScheduler, ASHA):
    """Asynchronous successive halving, with Tune's arguments: ``time_attr``
    ("training_iteration"), ``metric``, ``mode``, ``max_t`` (100), ``grace_period`` (1),
    ``reduction_factor`` (4), ``brackets`` (1), ``stop_last_trials`` (True)."""

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        max_t: float = 100,
        grace_period: float = 1,
        reduction_factor: float = 4,
        brackets: int = 1,
        stop_last_trials: bool = True,
    ) -> None:
        super().__init__(
            time_attr=time_attr,
            metric=metric,
            mode=mode,
            max_t=max_t,
            grace_period=grace_period,
            reduction_factor=reduction_factor,
            brackets=brackets,
            stop_last_trials=stop_last_trials,
        )


ASHAScheduler = AsyncHyperBandScheduler
