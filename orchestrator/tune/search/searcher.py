"""Ray Tune's ``Searcher`` for searchers of one's own, and how the engine drives one.

A Tune searcher's ``suggest`` returns a partial config, ``None`` (nothing now) or
``Searcher.FINISHED``; trialflow's returns a whole config or ``None``. The same method
names mean different things, so a Tune searcher is never handed to the engine as is:
:func:`engine_searcher` wraps it in :class:`TuneSearcherAdapter`, which merges each
suggestion into the run's space (its constants, and draws for keys the searcher left
out) and keeps Tune's calls (``set_search_properties``, ``on_trial_complete(...,
error=...)``). trialflow's own searchers (and this facade's ``BasicVariantGenerator``
and ``OptunaSearch``, which are trialflow's) pass through unchanged.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.search import Searcher as EngineSearcher
from orchestrator.search import SearchSpace
from orchestrator.search.optuna_own import merged
from orchestrator.tune.error import unsupported

__all__ = ["Searcher", "TuneSearcherAdapter", "engine_searcher"]

log = logging.getLogger("orchestrator.tune.search")


class Searcher:
    """Ray Tune's ``Searcher`` base class: subclass it and implement ``suggest``."""

    FINISHED = "FINISHED"
    CKPT_FILE_TMPL = "searcher-state-{}.pkl"

    def __init__(self, metric: str | None = None, mode: str | None = None, **_: Any) -> None:
        if mode is not None and mode not in ("min", "max"):
            raise ValueError("`mode` must be 'min' or 'max'.")
        self._metric = metric
        self._mode = mode

    @property
    def metric(self) -> str | None:
        return self._metric

    @property
    def mode(self) -> str | None:
        return self._mode

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        """Take the run's metric, mode and space; False: this searcher keeps its own."""
        return False

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        return False

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        raise NotImplementedError(f"{type(self).__name__} must implement suggest(trial_id)")

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        return None

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        return None

    def add_evaluated_point(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not take evaluated points")

    def get_state(self) -> dict[str, Any]:
        """Everything needed to go on after a driver crash (default: the attributes)."""
        return dict(self.__dict__)

    def set_state(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def save(self, checkpoint_path: str) -> None:
        raise unsupported(
            "Searcher.save(path)", "the run's journal keeps the searcher's get_state()"
        )

    def restore(self, checkpoint_path: str) -> None:
        raise unsupported("Searcher.restore(path)", "use tune.Tuner.restore(path, trainable)")


class TuneSearcherAdapter(EngineSearcher):
    """A Tune ``Searcher`` as trialflow's (see the module docstring)."""

    def __init__(self, searcher: Searcher, param_space: Mapping[str, Any] | None) -> None:
        self.searcher = searcher
        self.param_space = dict(param_space or {})
        self._space: SearchSpace | None = None
        self._finished = False
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
        took = self.searcher.set_search_properties(metric, mode, dict(self.param_space))
        if not took and space.random_domains:
            where = ".".join(next(iter(space.random_domains)))
            raise ConfigError(
                f"You passed a `param_space` with unresolved parameters ({where!r}) to "
                f"tune.Tuner, but the search algorithm {type(self.searcher).__name__} was "
                "already instantiated with a search space. Make sure that `param_space` does "
                "not contain any more parameter definitions - include them in the search "
                "algorithm's search space if necessary."
            )
        self._space, self._rng = space, random.Random(seed)

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if self._finished or self._space is None:
            return None
        suggestion = self.searcher.suggest(trial_id)
        if suggestion == Searcher.FINISHED:
            self._finished = True
            return None
        if suggestion is None:
            return None
        if not isinstance(suggestion, Mapping):
            raise ConfigError(
                f"{type(self.searcher).__name__}.suggest() must return a dict, None or "
                f"Searcher.FINISHED, got {type(suggestion).__name__}"
            )
        return merged(self._space.sample(self._rng), suggestion)

    def on_trial_result(self, trial_id: str, result: Mapping[str, Any]) -> None:
        self.searcher.on_trial_result(trial_id, dict(result))

    def on_trial_complete(
        self, trial_id: str, result: Mapping[str, Any] | None, error: bool = False
    ) -> None:
        self.searcher.on_trial_complete(
            trial_id, dict(result) if result is not None else None, error=error
        )

    def get_state(self) -> Any:
        try:
            import cloudpickle

            return cloudpickle.dumps((self.searcher.get_state(), self._finished))
        except Exception as err:  # resume loses it; the run goes on
            log.warning(
                "%s's state cannot be saved (%s): a restored run starts it afresh",
                type(self.searcher).__name__,
                err,
            )
            return None

    def set_state(self, state: Any) -> None:
        if state is None:
            return
        import cloudpickle

        searcher_state, self._finished = cloudpickle.loads(state)
        self.searcher.set_state(searcher_state)


def engine_searcher(searcher: Any, param_space: Mapping[str, Any] | None) -> EngineSearcher | None:
    """``searcher`` as the engine drives it (a Tune ``Searcher`` wrapped)."""
    if searcher is None or isinstance(searcher, EngineSearcher):
        return searcher
    if isinstance(searcher, Searcher):
        return TuneSearcherAdapter(searcher, param_space)
    raise unsupported(
        f"search_alg={type(searcher).__name__}",
        "use BasicVariantGenerator, OptunaSearch, ConcurrencyLimiter, Repeater, or a "
        "subclass of orchestrator.tune.search.Searcher",
    )
