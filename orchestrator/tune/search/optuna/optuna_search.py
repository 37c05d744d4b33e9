"""Ray Tune's ``OptunaSearch``: trialflow's OptunaSearch with Tune's arguments.

``space`` may be a define-by-run function, a dict of Optuna distributions, or a dict of
Tune domains (then it is the run's search space, as if given as ``param_space``);
``metric``/``mode`` may be lists (a multi-objective study: ``ResultGrid.get_pareto_front()``
gives its answer). ``points_to_evaluate``, ``evaluated_rewards``, ``sampler`` and
``seed`` as on Tune; ``study_name``/``storage`` (Optuna's own storage) are not covered.

It is also Tune's ``Searcher`` on its own, without a Tuner (as Tune's tests and some
users drive it): ``convert_search_space``, ``set_search_properties``, ``suggest`` (which
sets the searcher up on first use from the space and objective it was given),
``on_trial_complete(trial_id, result)``, ``add_evaluated_point`` and ``save``/``restore``
to a file. A Tuner sets it up itself and never calls these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.search import OptunaSearch as EngineOptunaSearch
from orchestrator.search import SearchSpace
from orchestrator.search.optuna_own import flat
from orchestrator.search.optuna_search import _distribution
from orchestrator.tune.error import unsupported
from orchestrator.tune.sample import translate_space

_NO_SPACE = (
    "Trying to sample a configuration from {cls}, but no search space has been defined. "
    "Either pass the `space` argument when instantiating the search algorithm, or pass a "
    "`param_space` to `tune.Tuner()`."
)
_NO_OBJECTIVE = (
    "Trying to sample a configuration from {cls}, but the `metric` ({metric}) or `mode` "
    "({mode}) parameters have not been set. Either pass these arguments when instantiating "
    "the search algorithm, or pass them to `tune.TuneConfig()`."
)
_SAVED_KIND = "orchestrator.tune.OptunaSearch"

__all__ = ["OptunaSearch"]


def _optuna_distributions(space: Mapping[str, Any]) -> bool:
    from optuna.distributions import BaseDistribution

    return all(isinstance(v, BaseDistribution) for v in space.values())


class OptunaSearch(EngineOptunaSearch):
    """See the module docstring."""

    def __init__(
        self,
        space: Mapping[str, Any] | Callable[[Any], Any] | None = None,
        metric: str | Sequence[str] | None = None,
        mode: str | Sequence[str] | None = None,
        points_to_evaluate: Sequence[Mapping[str, Any]] | None = None,
        sampler: Any = None,
        study_name: str | None = None,
        storage: Any = None,
        seed: int | None = None,
        evaluated_rewards: Sequence[Any] | None = None,
    ) -> None:
        if study_name is not None or storage is not None:
            raise unsupported(
                "OptunaSearch(study_name=..., storage=...)",
                "the study lives in the run's journal (its state is restored by "
                "Tuner.restore); read it as searcher.study",
            )
        if isinstance(space, (list, tuple)):
            raise unsupported(
                "OptunaSearch(space=[(name, distribution), ...])",
                "give a dict of Optuna distributions, a define-by-run function, or Tune domains",
            )
        #: Tune domains given here: the run's search space (see the module docstring).
        self.tune_space: dict[str, Any] | None = None
        own: Any = space
        if isinstance(space, Mapping) and not _optuna_distributions(space):
            self.tune_space, own = translate_space(space), None
        super().__init__(
            sampler,
            seed,
            space=own,
            metric=metric,
            mode=mode,
            points_to_evaluate=points_to_evaluate,
            evaluated_rewards=evaluated_rewards,
        )
        self.metric = metric
        self.mode = mode
        self._given_space = space
        self._suggested: dict[str, dict[str, Any]] = {}  # Tune: asked again, same answer

    # -- Tune's Searcher API, without a Tuner ------------------------------------------

    @staticmethod
    def convert_search_space(spec: Mapping[str, Any]) -> dict[str, Any]:
        """Tune domains as Optuna distributions, named by their "/"-joined key paths
        (the names this searcher gives Optuna); constants are left out."""
        space = SearchSpace(translate_space(dict(spec)))
        if space.grid_domains:
            raise ValueError(
                "Grid search parameters cannot be automatically converted to an Optuna "
                "search space."
            )
        return {"/".join(path): _distribution(d) for path, d in space.random_domains.items()}

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: Mapping[str, Any], **spec: Any
    ) -> bool:
        """Take a run's metric, mode and space; False when this searcher has its own
        space (as on Tune)."""
        if self._given_space is not None:
            return False
        self.metric = metric or self.metric
        self.mode = mode or self.mode
        self._set_up_alone(dict(config))
        return True

    def _set_up_alone(self, config: Mapping[str, Any] | None) -> None:
        if self.metric is None or self.mode is None:
            raise RuntimeError(
                _NO_OBJECTIVE.format(cls=type(self).__name__, metric=self.metric, mode=self.mode)
            )
        metric = self.metric if isinstance(self.metric, str) else None
        mode = self.mode if isinstance(self.mode, str) else None
        self.setup(
            SearchSpace(translate_space(dict(config or {}))),
            metric=metric,
            mode=mode,
            num_samples=1,
            seed=None,
        )
        self._alone_config = dict(config or {})

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if trial_id in self._suggested:
            return self._suggested[trial_id]
        if self._space is None:  # driven without a Tuner: set up from what it was given
            if self._given_space is None:
                raise RuntimeError(_NO_SPACE.format(cls=type(self).__name__))
            self._set_up_alone(self.tune_space)
        config = super().suggest(trial_id)
        if config is not None:
            self._suggested[trial_id] = config
        return config

    def on_trial_complete(
        self, trial_id: str, result: Mapping[str, Any] | None = None, error: bool = False
    ) -> None:
        self._suggested.pop(trial_id, None)
        if self._space is not None:
            super().on_trial_complete(trial_id, result, error)

    def add_evaluated_point(
        self,
        parameters: Mapping[str, Any],
        value: Any,
        error: bool = False,
        pruned: bool = False,
        intermediate_values: Sequence[float] | None = None,
    ) -> None:
        """Tell the study of a config evaluated elsewhere (Tune's arguments)."""
        import optuna
        from optuna.trial import TrialState

        if self._space is None:
            if self._given_space is None:
                raise RuntimeError(_NO_SPACE.format(cls=type(self).__name__))
            self._set_up_alone(self.tune_space)
        if callable(self._given_space) and not isinstance(self._given_space, Mapping):
            raise TypeError(
                "Define-by-run function passed in `space` argument is not yet supported when "
                "using `evaluated_rewards`. Please provide an `OptunaDistribution` dict or "
                "pass a Ray Tune search space to `tune.Tuner()`."
            )
        state = TrialState.FAIL if error else TrialState.PRUNED if pruned else None
        params = {name: self._encode(name, v) for name, v in flat(dict(parameters)).items()}
        unknown = [name for name in params if name not in self._distributions]
        if unknown:
            raise ConfigError(
                f"OptunaSearch.add_evaluated_point: {unknown[0]!r} is not a searched key "
                f"(those are: {', '.join(self._distributions) or 'none'})"
            )
        values: Any = None if value is None or error else value
        many = isinstance(values, Sequence) and not isinstance(values, str)
        self.study.add_trial(
            optuna.trial.create_trial(
                state=state or TrialState.COMPLETE,
                values=list(values) if many else None,
                value=None if many else values,
                params=params,
                distributions={name: self._distributions[name] for name in params},
                intermediate_values=dict(enumerate(intermediate_values or [])) or None,
            )
        )

    def add_evaluated_trials(self, trials_or_analysis: Any, metric: str) -> None:
        """Tell the study of trials run elsewhere: an ``ExperimentAnalysis``, a list of
        trials, or one (each with ``config``, ``last_result`` and ``status``); a trial
        without ``metric`` is left out, as on Tune."""
        if hasattr(trials_or_analysis, "trials"):
            trials = list(trials_or_analysis.trials)
        elif isinstance(trials_or_analysis, (list, tuple)):
            trials = list(trials_or_analysis)
        else:
            trials = [trials_or_analysis]
        if self._space is None:
            self._set_up_alone(self.tune_space)
        for trial in trials:
            last = dict(getattr(trial, "last_result", None) or {})
            if metric not in last:
                continue
            searched = {
                name: value
                for name, value in flat(dict(trial.config)).items()
                if name in self._distributions
            }
            status = str(getattr(trial, "status", ""))
            self.add_evaluated_point(
                searched,
                last[metric],
                error=status == "ERROR",
                pruned=status == "TERMINATED" and not last.get("done", False),
            )

    def setup(self, space: SearchSpace, **kwargs: Any) -> None:
        """Set up for a run's space; a study restored from a file (:meth:`restore`) goes
        on in it (the same space: ``set_state`` checks it)."""
        restored, self._restored_state = getattr(self, "_restored_state", None), None
        super().setup(space, **kwargs)
        self._alone_config = _nested(space.random_domains)  # what save() writes
        if restored is not None:
            self.set_state(restored)

    def _set_up(self) -> Any:
        if self._space is None and self._given_space is not None:
            self._set_up_alone(self.tune_space)  # its study, before any suggest, as on Tune
        return super()._set_up()

    def save(self, checkpoint_path: str) -> None:
        """Write this searcher (its study, its trials in flight, its space) to a file."""
        import cloudpickle

        saved = {
            "kind": _SAVED_KIND,
            "metric": self.metric,
            "mode": self.mode,
            "given_space": self._given_space,
            "tune_space": self.tune_space,
            "own": self._own,
            "sampler": self._sampler,
            "seed": self._seed,
            "config": getattr(self, "_alone_config", None),
            "state": self.get_state() if self._space is not None else None,
            "suggested": self._suggested,
        }
        with open(checkpoint_path, "wb") as file:
            file.write(cloudpickle.dumps(saved))

    def restore(self, checkpoint_path: str) -> None:
        """Go on from a file :meth:`save` wrote, into this searcher (built with any
        arguments: the saved ones win, as on Tune)."""
        import pickle

        with open(checkpoint_path, "rb") as file:
            saved = pickle.load(file)
        if not isinstance(saved, dict) or saved.get("kind") != _SAVED_KIND:
            raise ConfigError(
                f"OptunaSearch.restore: {checkpoint_path} was not written by "
                "OptunaSearch.save; give the file save() wrote"
            )
        self.metric, self.mode = saved["metric"], saved["mode"]
        self._given_space, self.tune_space = saved["given_space"], saved["tune_space"]
        self._own, self._sampler, self._seed = saved["own"], saved["sampler"], saved["seed"]
        self._suggested = saved["suggested"]
        if saved["state"] is not None:
            self._set_up_alone(saved["config"])
            self.set_state(saved["state"])
            # A Tuner running it next sets it up again in this space: the study goes on.
            self.tune_space = self.tune_space or saved["config"]
            self._restored_state = saved["state"]


def _nested(domains: Mapping[tuple[str, ...], Any]) -> dict[str, Any]:
    """``{("a", "b"): d}`` as ``{"a": {"b": d}}``: a space's searched keys as a space."""
    out: dict[str, Any] = {}
    for path, domain in domains.items():
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = domain
    return out
