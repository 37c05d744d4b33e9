"""Ray Tune's ``ResultGrid`` and ``Result``, built from a sweep's trials.

``ResultGrid`` holds one ``Result`` per trial of the run, in creation order, and picks
the best by Tune's scopes (``last``, ``avg``, ``last-5-avg``, ``last-10-avg``,
``all``). A multi-objective run has no single best: ``get_pareto_front()`` (an
addition to Tune's API) gives the results no other beats on every objective.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from orchestrator.core.best import finite_metric as metric_value
from orchestrator.errors import ConfigError, like_cause
from orchestrator.tune.checkpoint import Checkpoint
from orchestrator.tune.error import TuneError
from orchestrator.tune.tune_trial import tune_checkpoint

__all__ = ["Result", "ResultGrid"]

_SCOPES = ("last", "avg", "last-5-avg", "last-10-avg", "all")


def _pandas() -> Any:
    try:
        import pandas as pd
    except ImportError as err:
        raise ConfigError("dataframes need pandas: pip install 'trialflow[cli]'") from err
    return pd


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(value, dict):
        return {prefix.rstrip("/"): value}
    out: dict[str, Any] = {}
    for key, item in value.items():
        out.update(_flat(item, f"{prefix}{key}/"))
    return out


#: ``CheckpointConfig``'s ``(num_to_keep, (score attribute, order) or None)``.
Keep = tuple[int | None, tuple[str, str] | None]


class NoBestTrial(TuneError, RuntimeError):
    """No trial reported the metric asked for (a ``RuntimeError``, as on Tune)."""


class Result:
    """One trial's outcome: ``metrics`` (its last result, with ``config``), ``config``,
    ``checkpoint`` (its newest persisted one), ``path`` (its directory), ``error``,
    ``metrics_dataframe`` (every result) and ``best_checkpoints``. ``error`` is a
    ``TuneError`` naming the trial that is also an instance of the exception the
    trainable raised (``except ValueError`` catches it, as on Tune)."""

    def __init__(
        self, trial: Any, experiment_path: str, keep: Keep = (None, None), dirname: str = ""
    ) -> None:
        self._trial = trial
        self._keep = keep
        self.config: dict[str, Any] = dict(trial.config)
        last = trial.last_result
        self.metrics: dict[str, Any] = {**last, "config": self.config} if last else {}
        self.checkpoint: Checkpoint | None = tune_checkpoint(trial.latest_checkpoint)
        self.path: str = f"{experiment_path.rstrip('/')}/{dirname or trial.id}"
        state = getattr(trial.state, "value", str(trial.state))
        error = trial.error if state == "ERROR" else None
        self.error: BaseException | None = None
        if error is not None:
            # An instance of the user's exception class too, as Tune's task errors are.
            cause = getattr(error, "cause", None) or error
            said = str(error).removeprefix(f"trial {trial.id}: ")
            self.error = like_cause(TuneError, f"trial {trial.id} failed: {said}", cause)

    @property
    def filesystem(self) -> str:
        return self.path.split("://", 1)[0] if "://" in self.path else "local"

    @property
    def metrics_dataframe(self) -> Any:
        return _pandas().DataFrame([_flat(r) for r in self._trial.results])

    @property
    def best_checkpoints(self) -> list[tuple[Checkpoint, dict[str, Any]]]:
        """The trial's kept checkpoints, with the result each was saved at, oldest first:
        at most ``CheckpointConfig(num_to_keep)``, the best by its score attribute (or
        the newest), as on Tune. (The newest is also kept on storage to resume from,
        but is not one of the best unless it ranks among them.)"""
        out = []
        for checkpoint in self._trial.checkpoints:
            tune = tune_checkpoint(checkpoint)
            if tune is not None:
                out.append((tune, dict(checkpoint.metrics)))
        count, score = self._keep
        if count is None or len(out) <= count:
            return out
        order = list(range(len(out)))
        if score is not None:
            attr, mode = score
            sign = 1.0 if mode == "max" else -1.0

            def rank(i: int) -> tuple[bool, float, int]:
                value = metric_value(out[i][1], attr)
                return (value is not None, sign * value if value is not None else 0.0, i)

            order.sort(key=rank)
        chosen = set(order[-count:]) if count > 0 else set()
        return [pair for i, pair in enumerate(out) if i in chosen]

    def get_best_checkpoint(self, metric: str, mode: str) -> Checkpoint | None:
        sign = 1.0 if mode == "max" else -1.0
        scored = [
            (sign * v, c)
            for c, m in self.best_checkpoints
            if (v := metric_value(m, metric)) is not None
        ]
        return max(scored, key=lambda s: s[0])[1] if scored else None

    @classmethod
    def from_path(cls, path: Any) -> Result:
        """The result of the trial whose directory is ``path``, read from its run's
        journal (no Ray)."""
        from orchestrator.tune.reading import read_trial

        uri, trial = read_trial(path)
        return cls(trial, uri)

    def __repr__(self) -> str:
        from orchestrator.tune.result import AUTO_RESULT_KEYS

        shown = {k: v for k, v in self.metrics.items() if k not in AUTO_RESULT_KEYS}
        parts = [f"metrics={shown}", f"path={self.path!r}", f"filesystem={self.filesystem!r}"]
        parts.append(f"checkpoint={self.checkpoint}")
        if self.error is not None:
            parts.append(f"error={self.error!r}")
        return f"Result({', '.join(parts)})"


class ResultGrid:
    """Every trial's :class:`Result`, and the best of them (Ray Tune's ``ResultGrid``)."""

    def __init__(
        self,
        trials: Sequence[Any],
        experiment_path: str,
        metric: str | None,
        mode: str | None,
        objectives: tuple[list[str], list[str]] | None = None,
        keep: Keep = (None, None),
        dirnames: Mapping[str, str] | None = None,
    ) -> None:
        self._trials = list(trials)
        named = dirnames or {}
        self._results = [
            Result(t, experiment_path, keep, named.get(t.id, "")) for t in self._trials
        ]
        self.experiment_path = experiment_path
        self._metric, self._mode = metric, mode
        self._objectives = objectives

    def __len__(self) -> int:
        return len(self._results)

    def __getitem__(self, index: int) -> Result:
        return self._results[index]

    def __iter__(self) -> Iterator[Result]:
        return iter(self._results)

    def __repr__(self) -> str:
        return f"ResultGrid<[{', '.join(map(repr, self._results))}]>"

    @property
    def filesystem(self) -> str:
        return self.experiment_path.split("://", 1)[0] if "://" in self.experiment_path else "local"

    @property
    def errors(self) -> list[BaseException]:
        return [r.error for r in self._results if r.error is not None]

    @property
    def num_errors(self) -> int:
        return len(self.errors)

    @property
    def num_terminated(self) -> int:
        return sum(1 for t in self._trials if getattr(t.state, "value", "") == "TERMINATED")

    def get_best_result(
        self,
        metric: str | None = None,
        mode: str | None = None,
        scope: str = "last",
        filter_nan_and_inf: bool = True,
    ) -> Result:
        """The result of the best trial by ``metric`` in ``mode`` (default: the run's),
        each trial scored by ``scope``: its last value, its mean (``avg``), the mean of
        its last 5 or 10 (``last-5-avg``, ``last-10-avg``) or its best (``all``). A run
        of one trial has it as its best, whatever it reported (as on Tune)."""
        if len(self._results) == 1:
            return self._results[0]
        metric, mode = metric or self._metric, mode or self._mode
        if not metric or not mode:
            raise ConfigError(
                "No metric is provided. Either pass in a `metric` arg to `get_best_result` "
                "or specify a metric in the `TuneConfig` of your `Tuner`."
            )
        best = self.best_index(metric, mode, scope, filter_nan_and_inf)
        if best is None:
            raise NoBestTrial(
                f"No best trial found for the given metric: {metric}. This means that no "
                "trial has reported this metric, or all values reported for this metric "
                "are NaN. To not ignore NaN values, you can set the `filter_nan_and_inf` arg "
                "to False."
            )
        return self._results[best]

    def best_index(
        self, metric: str, mode: str, scope: str = "last", filter_nan_and_inf: bool = True
    ) -> int | None:
        """The index of the best trial by ``metric`` in ``mode`` and ``scope`` (the first
        of equals), or None when no trial reported a usable value."""
        if mode not in ("min", "max"):
            raise ConfigError(f"get_best_result: mode must be 'min' or 'max', got {mode!r}")
        if scope not in _SCOPES:
            raise ConfigError(f"get_best_result: scope must be one of {_SCOPES}, got {scope!r}")
        sign = 1.0 if mode == "max" else -1.0
        best: tuple[float, int] | None = None
        for index, trial in enumerate(self._trials):
            score = _score(trial, metric, scope, filter_nan_and_inf, sign)
            if score is None:
                continue
            key = (sign * score, -index)
            if best is None or key > best:
                best = key
        return None if best is None else -best[1]

    def get_pareto_front(
        self, metrics: Sequence[str] | None = None, modes: Sequence[str] | None = None
    ) -> list[Result]:
        """The results no other beats on every one of ``metrics`` (by last results): a
        multi-objective run's answer. Defaults: the multi-objective searcher's."""
        from orchestrator.api.pareto import pareto_front

        if metrics is None or modes is None:
            if self._objectives is None:
                raise ConfigError(
                    "get_pareto_front needs metrics and modes (this run's searcher has a "
                    "single objective)"
                )
            metrics, modes = metrics or self._objectives[0], modes or self._objectives[1]
        return pareto_front(
            self._results, lambda r: r.metrics, list(metrics), list(modes), metric_value
        )

    def get_dataframe(
        self, filter_metric: str | None = None, filter_mode: str | None = None
    ) -> Any:
        """One row per trial: its last result (or, with ``filter_metric`` and
        ``filter_mode``, its best by that metric), with ``config/...`` columns."""
        rows = []
        sign = 1.0 if filter_mode == "max" else -1.0
        for trial in self._trials:
            chosen = trial.last_result or {}
            if filter_metric and filter_mode and trial.results:
                scored = [
                    (sign * v, r)
                    for r in trial.results
                    if (v := metric_value(r, filter_metric)) is not None
                ]
                chosen = max(scored, key=lambda s: s[0])[1] if scored else chosen
            row = _flat({k: v for k, v in chosen.items() if k != "config"})
            row.update(_flat(dict(trial.config), "config/"))
            row["logdir"] = f"{self.experiment_path.rstrip('/')}/{trial.id}"
            rows.append(row)
        return _pandas().DataFrame(rows)


def _score(trial: Any, metric: str, scope: str, drop_bad: bool, sign: float) -> float | None:
    values = [v for r in trial.results if (v := _value(r, metric)) is not None]
    if drop_bad:
        values = [v for v in values if math.isfinite(v)]
    if not values:
        return None
    if scope == "last":
        last = _value(trial.last_result or {}, metric)
        if last is None or (drop_bad and not math.isfinite(last)):
            return None
        return last
    if scope == "all":
        return max(values) if sign > 0 else min(values)
    window = {"avg": len(values), "last-5-avg": 5, "last-10-avg": 10}[scope]
    tail = values[-window:]
    return sum(tail) / len(tail)


def _value(result: Any, metric: str) -> float | None:
    value: Any = result.get(metric) if isinstance(result, dict) else None
    if value is None and "/" in metric:
        value = result
        for part in metric.split("/"):
            value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
