"""What a sweep returns: its trials, and the best of them by the sweep's metric."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.core.best import finite_metric, lookup, pick_best, standing, value_of
from orchestrator.core.machine import TrialState
from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from orchestrator.api.trial import Trial
    from orchestrator.core.checkpoints import Checkpoint


class SweepResult:
    """The trials of one sweep (ordinary :class:`Trial` handles: hooks, ``restore`` and
    ``pause`` apply), and the best of them by ``metric`` and ``mode``."""

    def __init__(self, trials: Sequence[Trial], metric: str | None, mode: str | None) -> None:
        self.trials = list(trials)
        self.metric = metric
        self.mode = mode

    def __repr__(self) -> str:
        states: dict[str, int] = {}
        for trial in self.trials:
            states[trial.state.value] = states.get(trial.state.value, 0) + 1
        return f"SweepResult({len(self.trials)} trials: {states}, metric={self.metric!r})"

    # -- the best trial ------------------------------------------------------------------

    def get_best(
        self,
        metric: str | None = None,
        mode: str | None = None,
        scope: Literal["last", "all"] = "last",
    ) -> Trial:
        """The best trial by ``metric`` (default: the sweep's) in ``mode``, judged by each
        trial's newest value of it (``scope="last"``) or its best one (``"all"``), the
        rule of :mod:`orchestrator.core.best`: a NaN or infinite value never counts, and the
        first of equals wins. No finite value anywhere is an error naming the keys the
        trials reported."""
        metric = metric or self.metric
        mode = mode or self.mode
        if metric is None or mode not in ("min", "max"):
            raise ConfigError(
                "get_best needs a metric and mode='min' or 'max' (the sweep was run without "
                f"them): got metric={metric!r}, mode={mode!r}"
            )
        if scope not in ("last", "all"):
            raise ConfigError(f"get_best: scope must be 'last' or 'all', got {scope!r}")
        found = pick_best(
            ((t, standing(t.results, metric, mode, scope)) for t in self.trials), mode
        )
        if found is not None:
            return found[0]
        if any(value_of(t.results, metric) is not None for t in self.trials):
            raise ConfigError(
                f"no trial has a finite value of the metric {metric!r} (NaN and infinite "
                "values never count as the best)"
            )
        raise ConfigError(
            f"no trial reported the metric {metric!r}; the trials reported: "
            f"{', '.join(self._reported_keys()) or 'nothing'}"
        )

    @property
    def best_trial(self) -> Trial:
        return self.get_best()

    @property
    def best_config(self) -> dict[str, Any]:
        return dict(self.best_trial.config)

    @property
    def best_result(self) -> dict[str, Any]:
        result = self.best_trial.last_result
        assert result is not None
        return dict(result)

    @property
    def best_checkpoint(self) -> Checkpoint | None:
        """The best trial's best persisted checkpoint by the metric (its newest when its
        checkpoints do not report the metric), or None if it has none."""
        trial = self.best_trial
        checkpoints = trial.checkpoints
        if not checkpoints:
            return None
        metric = self.metric
        if metric is None or self.mode is None:
            return checkpoints[-1]
        newest_first = reversed(checkpoints)  # of equals, the newest
        found = pick_best(((c, lookup(c.metrics, metric)) for c in newest_first), self.mode)
        return found[0] if found is not None else checkpoints[-1]

    def pareto_front(self, metrics: Sequence[str], modes: Sequence[str]) -> list[Trial]:
        """The trials no other trial beats on every one of ``metrics`` at once (by their
        last results; ``modes`` says 'min' or 'max' for each): a multi-objective sweep's
        answer, where no single trial is best."""
        from orchestrator.api.pareto import pareto_front

        return pareto_front(self.trials, lambda t: t.last_result, metrics, modes, finite_metric)

    @property
    def errors(self) -> list[BaseException]:
        """The errors of the trials that ended in ERROR."""
        return [t.error for t in self.trials if t.state is TrialState.ERROR and t.error]

    def dataframe(self) -> Any:
        """A pandas DataFrame: one row per trial, with ``trial_id``, ``state``,
        ``config/*`` columns and its last result's keys."""
        try:
            import pandas as pd
        except ImportError as err:
            raise ConfigError(
                "SweepResult.dataframe() needs pandas: pip install 'trialflow[cli]'"
            ) from err
        rows = []
        for trial in self.trials:
            row: dict[str, Any] = {"trial_id": trial.id, "state": trial.state.value}
            row.update({f"config/{k}": v for k, v in _flat(trial.config).items()})
            row.update({k: v for k, v in (trial.last_result or {}).items() if k != "config"})
            rows.append(row)
        return pd.DataFrame(rows)

    def _reported_keys(self) -> list[str]:
        keys: dict[str, None] = {}
        for trial in self.trials:
            for result in trial.results[-1:]:
                keys.update(dict.fromkeys(result))
        return sorted(keys)


def _flat(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flat(value, name + "/"))
        else:
            flat[name] = value
    return flat
