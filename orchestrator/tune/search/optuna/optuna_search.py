"""Ray Tune's ``OptunaSearch``: trialflow's OptunaSearch with Tune's arguments.

``space`` may be a define-by-run function, a dict of Optuna distributions, or a dict of
Tune domains (then it is the run's search space, as if given as ``param_space``);
``metric``/``mode`` may be lists (a multi-objective study: ``ResultGrid.get_pareto_front()``
gives its answer). ``points_to_evaluate``, ``evaluated_rewards``, ``sampler`` and
``seed`` as on Tune; ``study_name``/``storage`` (Optuna's own storage) are not covered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from orchestrator.search import OptunaSearch as EngineOptunaSearch
from orchestrator.tune.errors import unsupported
from orchestrator.tune.sample import translate_space

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
