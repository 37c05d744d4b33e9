"""What an :class:`~orchestrator.search.OptunaSearch` may bring of its own: a space
(a define-by-run function, or Optuna distributions by name), an objective (one metric or
several: multi-objective), and a warm start (points to try first, or points already
evaluated, with their rewards).

Kept apart from the searcher so that the common case, a sweep's space and metric, stays
readable there. Plain data and Optuna calls only, like the searcher.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    import optuna
    from optuna.distributions import BaseDistribution

#: A define-by-run function (it calls ``trial.suggest_*`` and may return constants) or
#: Optuna distributions by parameter name ("/" joins nested keys).
OwnSpace = Callable[[Any], Mapping[str, Any] | None] | Mapping[str, Any]

__all__ = ["OwnObjective", "OwnSpace", "flat", "merged", "nested"]


def flat(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a/b": 1}``: Optuna's parameter names."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat(value, name + "/"))
        else:
            out[name] = value
    return out


def nested(params: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`flat`."""
    out: dict[str, Any] = {}
    for name, value in params.items():
        node = out
        *parents, last = name.split("/")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return out


def merged(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overlay``'s values put in, nested dicts merged key by key."""
    out = dict(base)
    for key, value in overlay.items():
        old = out.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            out[key] = merged(old, value)
        else:
            out[key] = value
    return out


def _modes(mode: Any) -> list[str] | None:
    if mode is None:
        return None
    modes = [mode] if isinstance(mode, str) else list(mode)
    if not modes or any(m not in ("min", "max") for m in modes):
        raise ConfigError(
            f"OptunaSearch: mode must be 'min', 'max' or a list of them, got {mode!r}"
        )
    return modes


def _metrics(metric: Any) -> list[str] | None:
    if metric is None:
        return None
    metrics = [metric] if isinstance(metric, str) else list(metric)
    if not metrics or not all(isinstance(m, str) and m for m in metrics):
        raise ConfigError(
            f"OptunaSearch: metric must be a result key or a list of them, got {metric!r}"
        )
    return metrics


@dataclass(frozen=True)
class OwnObjective:
    """An OptunaSearch's own space, objective and warm start (see the module docstring)."""

    space: OwnSpace | None
    metrics: list[str] | None
    modes: list[str] | None
    points: list[dict[str, Any]]
    rewards: list[Any] | None

    @classmethod
    def check(
        cls,
        space: Any,
        metric: Any,
        mode: Any,
        points: Sequence[Mapping[str, Any]] | None,
        rewards: Sequence[Any] | None,
    ) -> OwnObjective:
        if space is not None and not (callable(space) or isinstance(space, Mapping)):
            raise ConfigError(
                "OptunaSearch: space must be a define-by-run function (trial -> dict | None) "
                f"or a dict of Optuna distributions, got {type(space).__name__}"
            )
        if isinstance(space, Mapping):
            from optuna.distributions import BaseDistribution

            wrong = [k for k, v in space.items() if not isinstance(v, BaseDistribution)]
            if wrong:
                raise ConfigError(
                    f"OptunaSearch: space[{wrong[0]!r}] is not an Optuna distribution; give "
                    "optuna.distributions objects, or put domains in the sweep's space"
                )
        metrics, modes = _metrics(metric), _modes(mode)
        if metrics and modes and len(metrics) != len(modes):
            raise ConfigError(
                f"OptunaSearch: {len(metrics)} metrics but {len(modes)} modes; give one mode each"
            )
        point_list = [dict(p) for p in points or []]
        if any(not isinstance(p, Mapping) for p in points or []):
            raise ConfigError("OptunaSearch: points_to_evaluate must be a list of dicts")
        reward_list = list(rewards) if rewards is not None else None
        if reward_list is not None:
            if len(reward_list) != len(point_list):
                raise ConfigError(
                    f"OptunaSearch: {len(reward_list)} evaluated_rewards for "
                    f"{len(point_list)} points_to_evaluate; give one reward per point"
                )
            if callable(space) and not isinstance(space, Mapping):
                raise ConfigError(
                    "OptunaSearch: evaluated_rewards need the distributions of the points; "
                    "a define-by-run space has none: use points_to_evaluate alone"
                )
        return cls(space, metrics, modes, point_list, reward_list)

    def objective(self, metric: str | None, mode: str | None) -> tuple[list[str], list[str]]:
        """The metrics and modes to optimise: the sweep's when it has them (as Ray Tune's
        TuneConfig overrides the searcher's), else this searcher's own."""
        metrics = [metric] if metric is not None else self.metrics
        modes = [mode] if mode is not None else self.modes
        if not metrics or not modes:
            raise ConfigError(
                "OptunaSearch needs metric and mode (e.g. metric='loss', mode='min') "
                f"to know what to optimise, got metric={metric!r} mode={mode!r}"
            )
        if len(metrics) != len(modes):
            raise ConfigError(f"OptunaSearch: metrics {metrics} and modes {modes} differ in length")
        return metrics, modes

    def warm_start(
        self,
        study: optuna.Study,
        distributions: Mapping[str, BaseDistribution],
        encode: Callable[[str, Any], Any],
    ) -> None:
        """Queue the points to evaluate first, or record them as evaluated."""
        import optuna

        for index, point in enumerate(self.points):
            params = {name: encode(name, value) for name, value in flat(point).items()}
            unknown = [name for name in params if distributions and name not in distributions]
            if unknown and not callable(self.space):
                raise ConfigError(
                    f"OptunaSearch: points_to_evaluate[{index}] names {unknown[0]!r}, which is "
                    f"not a searched key (those are: {', '.join(distributions) or 'none'})"
                )
            if self.rewards is None:
                study.enqueue_trial(params)
                continue
            reward = self.rewards[index]
            values = list(reward) if isinstance(reward, Sequence) else [reward]
            study.add_trial(
                optuna.trial.create_trial(
                    params=params,
                    distributions={name: distributions[name] for name in params},
                    values=values,
                )
            )

    def suggest(
        self, study: optuna.Study, distributions: Mapping[str, BaseDistribution]
    ) -> tuple[optuna.Trial, dict[str, Any]]:
        """A trial from this searcher's own space, and its config (nested)."""
        if isinstance(self.space, Mapping):
            trial = study.ask(dict(distributions))
            return trial, nested(trial.params)
        assert self.space is not None
        trial = study.ask()
        constants = self.space(trial)
        if constants is not None and not isinstance(constants, Mapping):
            raise ConfigError(
                "OptunaSearch: the define-by-run function must return None or a dict of "
                f"constants, got {type(constants).__name__}"
            )
        return trial, merged(nested(trial.params), dict(constants or {}))
