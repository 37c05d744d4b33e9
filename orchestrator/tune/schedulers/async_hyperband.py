"""Ray Tune's ``AsyncHyperBandScheduler`` (``ASHAScheduler``): trialflow's ASHA."""

from __future__ import annotations

import numpy as np

from orchestrator.schedulers import ASHA, TrialInfo
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

    def on_trial_add(self, trial: TrialInfo) -> None:
        """As trialflow's ASHA, after Tune's bracket draw from NumPy's global RNG: Tune
        draws one per trial there, between its searcher's draws, so a script seeded with
        ``np.random.seed`` samples Tune's configs only if this draw happens too."""
        if trial.trial_id not in self._trials:
            sizes = np.array([len(rungs) for rungs in self.rungs])
            probs = np.e ** (sizes - sizes.max())
            np.random.choice(len(sizes), p=probs / probs.sum())
        super().on_trial_add(trial)


ASHAScheduler = AsyncHyperBandScheduler
