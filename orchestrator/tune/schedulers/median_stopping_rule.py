"""Ray Tune's ``MedianStoppingRule``: trialflow's MedianStopping, with Tune's defaults
(``time_attr="time_total_s"``, ``grace_period=60.0`` seconds)."""

from __future__ import annotations

from orchestrator.schedulers import MedianStopping
from orchestrator.tune.error import unsupported
from orchestrator.tune.schedulers.base import TuneScheduler

__all__ = ["MedianStoppingRule"]


class MedianStoppingRule(TuneScheduler, MedianStopping):
    """The median stopping rule with Tune's arguments and defaults. ``min_time_slice``
    (a fairness knob of Tune's pausing) must stay 0: trials here are not time-sliced."""

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        grace_period: float = 60.0,
        min_samples_required: int = 3,
        min_time_slice: float = 0,
        hard_stop: bool = True,
    ) -> None:
        if min_time_slice:
            raise unsupported(
                "MedianStoppingRule(min_time_slice=...)",
                "leave it 0; trials are not time-sliced here (hard_stop=False pauses instead)",
            )
        super().__init__(
            time_attr=time_attr,
            metric=metric,
            mode=mode,
            grace_period=grace_period,
            min_samples_required=min_samples_required,
            hard_stop=hard_stop,
        )
