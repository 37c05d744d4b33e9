"""Model-based search with Optuna (TPE by default), through its ask-and-tell interface.

Optuna is optional: it is imported when an :class:`OptunaSearch` is built, never by
``import orchestrator.search``. Each random domain becomes one Optuna parameter named by
its "/"-joined key path; the space fills in constants and ``sample_from`` values.
"""

from __future__ import annotations

import importlib
import logging
import math
import numbers
import pickle
import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.core import moved
from orchestrator.errors import ConfigError
from orchestrator.search.domains import Choice, Domain, LogUniform, QUniform, RandInt, Uniform
from orchestrator.search.more_domains import LogRandInt, QLogRandInt, QLogUniform, QRandInt
from orchestrator.search.optuna_own import OwnObjective, OwnSpace, merged
from orchestrator.search.searcher import Searcher, check_seed, check_setup, checked_state
from orchestrator.search.space import Path, SearchSpace

if TYPE_CHECKING:
    import optuna
    from optuna.distributions import BaseDistribution

_STATE_KIND = "OptunaSearch"
_STATE_VERSION = 1
_DIRECTIONS: dict[str, Literal["minimize", "maximize"]] = {"min": "minimize", "max": "maximize"}


def _require_optuna() -> None:
    """Fail on construction, with what to do, rather than with an ImportError later."""
    try:
        importlib.import_module("optuna")
    except ImportError as error:
        raise ConfigError("OptunaSearch needs Optuna: pip install 'trialflow[optuna]'") from error


def _finite(value: Any) -> float | None:
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def _by_value(values: tuple[Any, ...]) -> bool:
    """Whether Optuna can take the choices themselves, not their indices: values of one
    plain type, all distinct (Optuna finds a value's index by ``==``: 1 == True)."""
    kinds = {type(value) for value in values}
    return (
        len(kinds) == 1
        and kinds <= {str, int, float, bool}
        and all(value == value for value in values)  # no NaN
        and len(set(values)) == len(values)
    )


def _distribution(domain: Domain) -> BaseDistribution:
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    if isinstance(domain, Choice):
        values = tuple(domain.values)
        return CategoricalDistribution(list(values) if _by_value(values) else range(len(values)))
    if isinstance(domain, QLogUniform):  # Optuna has no step on a log scale: quantized after
        return FloatDistribution(domain.lowest, domain.highest, log=True)
    if isinstance(domain, QLogRandInt):
        return IntDistribution(domain.first * domain.q, domain.last * domain.q, log=True)
    if isinstance(domain, QRandInt):
        return IntDistribution(domain.first * domain.q, domain.last * domain.q, step=domain.q)
    if isinstance(domain, LogRandInt):
        return IntDistribution(domain.low, domain.high - 1, log=True)
    if isinstance(domain, Uniform):
        return FloatDistribution(domain.low, domain.high)
    if isinstance(domain, LogUniform):
        return FloatDistribution(domain.low, domain.high, log=True)
    if isinstance(domain, QUniform):
        return FloatDistribution(domain.lowest, domain.highest, step=domain.q)
    if isinstance(domain, RandInt):
        return IntDistribution(domain.low, domain.high - 1)
    raise ConfigError(f"OptunaSearch: no Optuna distribution for {domain!r}")


class OptunaSearch(Searcher):
    """Optuna's sampler (``TPESampler(seed=seed)`` unless given) over the random domains.

    ``quniform(low, high, q)`` becomes ``FloatDistribution(lowest, highest, step=q)``,
    where lowest and highest are the bounds moved inwards to multiples of q: Optuna's
    steps count from ``low`` and must divide ``high - low``, so these are the bounds for
    which Optuna's values are exactly the domain's (multiples of q within the bounds).
    Grids are refused: Optuna's trials are not a grid's fixed combinations.

    Its own (optional, Ray Tune's arguments): ``space``, a define-by-run function
    (``trial -> dict of constants | None``, calling ``trial.suggest_*``) or Optuna
    distributions by name, instead of domains in the sweep's space; ``metric`` and
    ``mode``, used when the sweep has none, and lists of them for a multi-objective
    study (then results report nothing to Optuna until the trial ends);
    ``points_to_evaluate``, configs tried first; ``evaluated_rewards``, their known
    rewards, so they are recorded as finished instead of run. See
    :mod:`orchestrator.search.optuna_own`.
    """

    def __init__(
        self,
        sampler: optuna.samplers.BaseSampler | None = None,
        seed: int | None = None,
        *,
        space: OwnSpace | None = None,
        metric: str | Sequence[str] | None = None,
        mode: str | Sequence[str] | None = None,
        points_to_evaluate: Sequence[Mapping[str, Any]] | None = None,
        evaluated_rewards: Sequence[Any] | None = None,
    ) -> None:
        _require_optuna()
        import optuna

        check_seed("OptunaSearch", seed)
        self._own = OwnObjective.check(space, metric, mode, points_to_evaluate, evaluated_rewards)
        if sampler is not None and not isinstance(sampler, optuna.samplers.BaseSampler):
            raise ConfigError(
                f"OptunaSearch: sampler must be an optuna.samplers.BaseSampler, "
                f"got {type(sampler).__name__}"
            )
        if sampler is not None and seed is not None:
            raise ConfigError("OptunaSearch: give the seed to your sampler, not to OptunaSearch")
        self._sampler = sampler
        self._seed = seed
        self._space: SearchSpace | None = None
        self._study: optuna.Study | None = None
        self._metric = ""
        self._metrics: list[str] = []
        self._params: dict[str, tuple[Path, Domain]] = {}
        self._distributions: dict[str, BaseDistribution] = {}
        self._trials: dict[str, optuna.Trial] = {}
        self._last_step: dict[str, int] = {}
        self._rng = random.Random()

    def setup(
        self,
        space: SearchSpace,
        *,
        metric: str | None,
        mode: str | None,
        num_samples: int,
        seed: int | None,
    ) -> None:
        import optuna

        check_setup("OptunaSearch", metric, mode, num_samples, seed)
        own = self._own
        metrics, modes = own.objective(metric, mode)
        if space.grid_domains:
            where = ".".join(next(iter(space.grid_domains)))
            raise ConfigError(
                f"space key '{where}': OptunaSearch does not take grid(...); "
                "use choice(...) or RandomSearch"
            )
        if own.space is not None and space.random_domains:
            where = ".".join(next(iter(space.random_domains)))
            raise ConfigError(
                f"space key '{where}': OptunaSearch was given its own space, so the sweep's "
                "space may hold constants only; put every searched key in one of the two"
            )
        if optuna.logging.get_verbosity() < logging.WARNING:
            optuna.logging.set_verbosity(logging.WARNING)  # one INFO line per trial
        self._params, self._distributions = {}, {}
        for path, domain in space.random_domains.items():
            name = "/".join(path)
            if name in self._params:
                raise ConfigError(
                    f"space key '{'.'.join(path)}': its Optuna name {name!r} is also another "
                    "key's; rename a key so no two join with '/' to the same name"
                )
            self._params[name] = (path, domain)
            self._distributions[name] = _distribution(domain)
        if isinstance(own.space, Mapping):
            self._distributions = dict(own.space)
        own_seed = self._seed if self._seed is not None else seed
        sampler = self._sampler or optuna.samplers.TPESampler(seed=own_seed)
        self._study = optuna.create_study(
            directions=[_DIRECTIONS[m] for m in modes],
            sampler=sampler,
            pruner=optuna.pruners.NopPruner(),
        )
        self._space, self._metric, self._metrics = space, metrics[0], metrics
        self._trials, self._last_step = {}, {}
        self._rng = random.Random(own_seed)
        own.warm_start(self._study, self._distributions, self._encode)

    def _encode(self, name: str, value: Any) -> Any:
        """A config value as Optuna holds it: a choice that Optuna takes by index, its
        index (a warm-start point is written in config values)."""
        param = self._params.get(name)
        if param is not None and isinstance(param[1], Choice):
            values = tuple(param[1].values)
            if not _by_value(values):
                return values.index(value)
        return value

    @property
    def study(self) -> optuna.Study:
        """The Optuna study (after setup): for Optuna's analysis and plots, not to be told to."""
        return self._set_up()[1]

    def _set_up(self) -> tuple[SearchSpace, optuna.Study]:
        if self._space is None or self._study is None:
            raise RuntimeError("OptunaSearch: call setup() first")
        return self._space, self._study

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        space, study = self._set_up()
        if trial_id in self._trials:
            raise ConfigError(f"OptunaSearch: trial {trial_id} was already suggested a config")
        if self._own.space is not None:
            trial, config = self._own.suggest(study, self._distributions)
            self._trials[trial_id] = trial
            return merged(space.sample(self._rng), config)
        trial = study.ask(self._distributions)
        values: dict[Path, Any] = {}
        for name, (path, domain) in self._params.items():
            value = trial.params[name]
            if isinstance(domain, Choice):
                by_value = _by_value(tuple(domain.values))
                value = value if by_value else domain.values[value]
            elif isinstance(domain, QUniform):
                value = domain.quantize(value)  # Optuna's low + k * step carries float noise
            elif isinstance(domain, QLogRandInt):
                value = min(max(round(value / domain.q), domain.first), domain.last) * domain.q
            values[path] = value
        self._trials[trial_id] = trial
        return space.resolve(values, self._rng)

    def on_trial_result(self, trial_id: str, result: Mapping[str, Any]) -> None:
        trial = self._trials.get(trial_id)
        if len(self._metrics) > 1:
            return  # Optuna's intermediate values have one objective
        value = _finite(result.get(self._metric))
        step = result.get("training_iteration")
        if trial is None or value is None or not isinstance(step, int) or isinstance(step, bool):
            return
        if step <= self._last_step.get(trial_id, -1):
            return  # Optuna warns on a step reported twice; a restored trial may repeat one
        trial.report(value, step)
        self._last_step[trial_id] = step

    def on_trial_complete(
        self, trial_id: str, result: Mapping[str, Any] | None, error: bool = False
    ) -> None:
        from optuna.trial import TrialState

        _, study = self._set_up()
        trial = self._trials.pop(trial_id, None)
        reported_along = self._last_step.pop(trial_id, None) is not None
        if trial is None:
            return
        if len(self._metrics) > 1:  # several objectives: every one must be finite
            ended = None if error else result
            found = [None if ended is None else _finite(ended.get(m)) for m in self._metrics]
            values = [value for value in found if value is not None]
            if len(values) < len(found):
                study.tell(trial, state=TrialState.FAIL)
            else:
                study.tell(trial, values)
            return
        raw = None if error or result is None else result.get(self._metric)
        value = _finite(raw)
        if value is not None:
            study.tell(trial, value)
        elif result is not None and raw is None and not error and reported_along:
            # It ended without the metric in its last result but reported it on the
            # way: Optuna's TPE ranks a PRUNED trial by its last intermediate value.
            study.tell(trial, state=TrialState.PRUNED)
        else:
            # Failed, or nothing (finite) to learn from: a NaN or infinite value, or no
            # result with the metric at all (the sweep then passes result=None).
            study.tell(trial, state=TrialState.FAIL)

    def get_state(self) -> bytes:
        """The pickled study (its trials, sampler and RNG) and the trials still running.

        Bytes, not objects: the study goes on changing after the snapshot is taken.
        ``set_state`` unpickles it, so only give it states this searcher wrote.
        """
        _, study = self._set_up()
        return pickle.dumps(
            {
                "kind": _STATE_KIND,
                "version": _STATE_VERSION,
                "distributions": self._distributions,
                "study": study,
                "trials": self._trials,
                "last_step": self._last_step,
                "rng": self._rng.getstate(),
            }
        )

    def set_state(self, state: Any) -> None:
        self._set_up()
        try:
            loaded = moved.loads(state) if isinstance(state, bytes) else None
        except Exception:  # not a pickle at all: as wrong as a pickle of something else
            loaded = None
        loaded = checked_state(_STATE_KIND, loaded, _STATE_VERSION)
        if loaded["distributions"] != self._distributions:
            raise ConfigError(
                "OptunaSearch: the state is from a different search space; "
                "resume with the space the sweep was started with"
            )
        # One pickle holds the study and its running trials: they still share the storage.
        self._study = loaded["study"]
        self._trials = loaded["trials"]
        self._last_step = loaded["last_step"]
        self._rng.setstate(loaded["rng"])
