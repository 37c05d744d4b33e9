"""Ray Tune's ``ExperimentAnalysis``: what the legacy ``tune.run(...)`` returns.

A view over the run's :class:`~orchestrator.tune.result_grid.ResultGrid` with Tune's
older names: ``trials`` (Tune's ``Trial`` view, as callbacks get), ``best_trial``,
``best_config``, ``best_result``, ``best_checkpoint`` for the run's metric and mode,
``get_best_trial``/``get_best_config`` for others, and the dataframes. The choice of the
best trial is the grid's (one rule for both APIs); the checks and their words are
Tune's.
"""

from __future__ import annotations

import logging
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.tune.checkpoint import Checkpoint
from orchestrator.tune.error import unsupported
from orchestrator.tune.reading import read_run
from orchestrator.tune.restoring import local_filesystem
from orchestrator.tune.result_grid import ResultGrid, _flat, _pandas
from orchestrator.tune.tune_trial import TuneTrial

__all__ = ["ExperimentAnalysis"]

log = logging.getLogger("orchestrator.tune")


class ExperimentAnalysis:
    """The outcome of ``tune.run(...)`` (see the module docstring)."""

    def __init__(
        self,
        experiment_checkpoint_path: Any,
        *,
        storage_filesystem: Any = None,
        trials: list[TuneTrial] | None = None,
        default_metric: str | None = None,
        default_mode: str | None = None,
    ) -> None:
        """``ExperimentAnalysis(path, default_metric=..., default_mode=...)`` reads a
        finished run back from its directory (its journal; no Ray), as on Tune."""
        if default_mode is not None and default_mode not in ("min", "max"):
            raise ConfigError("`default_mode` has to be None or one of [min, max]")
        grid = experiment_checkpoint_path
        if not isinstance(grid, ResultGrid):
            if not local_filesystem(storage_filesystem):
                raise unsupported("ExperimentAnalysis(storage_filesystem=...)", "give a path")
            uri, recorded, name = read_run(grid, "ExperimentAnalysis")
            grid = ResultGrid(recorded, uri, default_metric, default_mode)
            trials = [TuneTrial(t, uri, name, None) for t in recorded]
        elif trials is None:
            trials = [TuneTrial(t, grid.experiment_path, "trainable", None) for t in grid._trials]
        self._grid = grid
        self.trials = trials
        self.default_metric: str | None = default_metric or grid._metric
        self.default_mode: str | None = default_mode or grid._mode

    @classmethod
    def of(
        cls, grid: ResultGrid, trainable_name: str, name_creator: Any = None
    ) -> ExperimentAnalysis:
        path = grid.experiment_path
        views = [TuneTrial(t, path, trainable_name, name_creator) for t in grid._trials]
        return cls(grid, trials=views)

    @property
    def experiment_path(self) -> str:
        return self._grid.experiment_path

    # -- the best, by the run's metric and mode ------------------------------------------

    def _defaults(self, what: str, instead: str) -> tuple[str, str]:
        if not self.default_metric or not self.default_mode:
            raise ConfigError(
                f"To fetch the `{what}`, pass a `metric` and `mode` parameter to "
                f"`tune.run()`. Alternatively, use the `{instead}` method to set the "
                "metric and mode explicitly."
            )
        return self.default_metric, self.default_mode

    @property
    def best_trial(self) -> TuneTrial | None:
        return self.get_best_trial(*self._defaults("best_trial", "get_best_trial(metric, mode)"))

    @property
    def best_config(self) -> dict[str, Any] | None:
        return self.get_best_config(*self._defaults("best_config", "get_best_config(metric, mode)"))

    @property
    def best_result(self) -> dict[str, Any]:
        metric, mode = self._defaults("best_result", "get_best_trial(metric, mode).last_result")
        best = self.get_best_trial(metric, mode)
        return best.last_result if best is not None else {}

    @property
    def best_checkpoint(self) -> Checkpoint | None:
        metric, mode = self._defaults("best_checkpoint", "get_best_checkpoint(trial, metric, mode)")
        best = self.get_best_trial(metric, mode)
        return self.get_best_checkpoint(best, metric, mode) if best is not None else None

    @property
    def best_dataframe(self) -> Any:
        best = self.best_trial
        return self.trial_dataframes[best.trial_id] if best is not None else None

    @property
    def best_result_df(self) -> Any:
        return _pandas().DataFrame.from_records([_flat(self.best_result)], index="trial_id")

    # -- any metric ------------------------------------------------------------------------

    def get_best_trial(
        self,
        metric: str | None = None,
        mode: str | None = None,
        scope: str = "last",
        filter_nan_and_inf: bool = True,
    ) -> TuneTrial | None:
        """The best trial by ``metric`` in ``mode`` and ``scope`` (the run's by default);
        None, with a warning, when no trial reported it. A run of one trial: that one."""
        if len(self.trials) == 1:
            return self.trials[0]
        metric = metric or self.default_metric
        if not metric:
            raise ConfigError(
                "No `metric` has been passed and `default_metric` has not been set. "
                "Please specify the `metric` parameter."
            )
        mode = mode or self.default_mode
        if not mode:
            raise ConfigError(
                "No `mode` has been passed and `default_mode` has not been set. "
                "Please specify the `mode` parameter."
            )
        if mode not in ("min", "max"):
            raise ConfigError("If set, `mode` has to be one of [min, max]")
        index = self._grid.best_index(metric, mode, scope, filter_nan_and_inf)
        if index is None:
            log.warning("Could not find best trial. Did you pass the correct `metric` parameter?")
            return None
        return self.trials[index]

    def get_best_config(
        self,
        metric: str | None = None,
        mode: str | None = None,
        scope: str = "last",
    ) -> dict[str, Any] | None:
        best = self.get_best_trial(metric, mode, scope)
        return best.config if best is not None else None

    def get_best_checkpoint(
        self, trial: TuneTrial, metric: str | None = None, mode: str | None = None
    ) -> Checkpoint | None:
        """``trial``'s kept checkpoint with the best ``metric`` (default: its newest)."""
        result = self._grid[self.trials.index(trial)]
        if metric is None:
            return result.checkpoint
        return result.get_best_checkpoint(metric, mode or self.default_mode or "max")

    def get_last_checkpoint(
        self,
        trial: TuneTrial | None = None,
        metric: str = "training_iteration",
        mode: str = "max",
    ) -> Checkpoint | None:
        """``trial``'s newest checkpoint; without a trial, the best trial's by ``metric``
        and ``mode`` (by default the trial that ran the most iterations), as on Tune."""
        trial = trial or self.get_best_trial(metric, mode)
        return trial.checkpoint if trial is not None else None

    # -- the data --------------------------------------------------------------------------

    @property
    def results(self) -> dict[str, dict[str, Any]]:
        """Each trial's last result, by trial id."""
        return {t.trial_id: t.last_result for t in self.trials}

    @property
    def results_df(self) -> Any:
        rows = [_flat(t.last_result) for t in self.trials if t.last_result]
        return (
            _pandas().DataFrame.from_records(rows, index="trial_id")
            if rows
            else (_pandas().DataFrame())
        )

    @property
    def trial_dataframes(self) -> dict[str, Any]:
        """Every result of each trial, by trial id."""
        return {
            t.trial_id: r.metrics_dataframe for t, r in zip(self.trials, self._grid, strict=True)
        }

    def dataframe(self, metric: str | None = None, mode: str | None = None) -> Any:
        """One row per trial: its last result or, with ``metric`` and ``mode``, its best
        ever by that metric (Tune's rule: the run's defaults are not used here)."""
        if mode and mode not in ("min", "max"):
            raise ConfigError("If set, `mode` has to be one of [min, max]")
        if mode and not metric:
            raise ConfigError(
                "If a `mode` is passed to `ExperimentAnalysis.dataframe(), you'll also have "
                "to pass a `metric`!"
            )
        return self._grid.get_dataframe(filter_metric=metric, filter_mode=mode)

    def get_all_configs(self, prefix: bool = False) -> dict[str, dict[str, Any]]:
        """Each trial's config by its directory (``prefix``: keys as ``config/...``)."""
        return {
            t.local_path: (_flat(t.config, "config/") if prefix else t.config) for t in self.trials
        }

    def __repr__(self) -> str:
        return f"ExperimentAnalysis({self.experiment_path!r}, {len(self.trials)} trials)"
