"""What every facade scheduler adds to trialflow's: Ray Tune's checks and stoppers.

Each of Tune's scheduler classes here is trialflow's scheduler with this mixin in front,
so it is one (``isinstance(s, orchestrator.schedulers.PBT)`` holds, and the sweep treats
it as such). The mixin (1) refuses a metric or mode given both to the scheduler and to
``TuneConfig`` (Tune's error), and (2) runs the run's driver-side stopper
(:mod:`orchestrator.tune.stopper`) on every result before the scheduler, as Tune's
controller does: a trial it stops is not shown to the scheduler, and ``stop_all()``
ends the sweep. With such a stopper every result is a decision point, so a trial never
runs a step past one its stopper would have stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.schedulers import FIFO, Decision, Population, Stop, TrialInfo

__all__ = ["FIFOScheduler", "TuneScheduler"]


class TuneScheduler:
    """The mixin (see the module docstring). Put it first among the bases."""

    _tune_stopper: Any = None  # set by the Tuner: a Stopper, or None
    _on_stop_all: Callable[[], None] | None = None

    def attach_stopper(self, stopper: Any, on_stop_all: Callable[[], None]) -> None:
        self._tune_stopper, self._on_stop_all = stopper, on_stop_all

    def __getstate__(self) -> dict[str, Any]:
        # The run's wiring (it ends the sweep) is not the scheduler's: set again by the
        # Tuner that runs it. The journal pickles the scheduler with the sweep's call.
        return {**self.__dict__, "_on_stop_all": None}

    def set_search_properties(self, metric: str | None, mode: str | None) -> None:
        own_metric = getattr(self, "metric", None)
        own_mode = getattr(self, "mode", None)
        if (own_metric and metric and own_metric != metric) or (
            own_mode and mode and own_mode != mode
        ):
            raise ConfigError(
                f"You passed a `metric` or `mode` argument to `tune.TuneConfig()` "
                f"({metric!r}, {mode!r}), but the scheduler {type(self).__name__} was "
                f"already given its own ({own_metric!r}, {own_mode!r}). Either remove the "
                "arguments from your scheduler or from `tune.TuneConfig()` args."
            )
        super().set_search_properties(metric, mode)  # type: ignore[misc]

    def on_trial_result(
        self, trial: TrialInfo, result: Mapping[str, Any], population: Population
    ) -> list[Decision]:
        stopper = self._tune_stopper
        if stopper is not None:
            stop = bool(stopper(trial.trial_id, dict(result)))
            if stopper.stop_all() and self._on_stop_all is not None:
                self._on_stop_all()
                stop = True
            if stop:
                return [Stop(trial.trial_id)]
        return super().on_trial_result(trial, result, population)  # type: ignore[misc, no-any-return]

    def next_decision_at(self, trial: TrialInfo) -> float | None:
        if self._tune_stopper is not None:
            return float(trial.iteration + 1)  # the stopper sees every result
        return super().next_decision_at(trial)  # type: ignore[misc, no-any-return]


class FIFOScheduler(TuneScheduler, FIFO):
    """Ray Tune's ``FIFOScheduler``: no early stopping; trials run to their stop
    criteria."""
