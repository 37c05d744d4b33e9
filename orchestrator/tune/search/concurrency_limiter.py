"""Ray Tune's ``ConcurrencyLimiter``: at most ``max_concurrent`` trials of the searcher
run at once (the sweep's concurrency bound); ``batch=True`` waits for a whole batch to
end before asking for the next one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.search import Searcher as EngineSearcher
from orchestrator.search import SearchSpace
from orchestrator.tune.search.searcher import engine_searcher

__all__ = ["ConcurrencyLimiter", "Wrapper"]


class Wrapper(EngineSearcher):
    """A searcher around another (a Tune searcher is adapted first)."""

    def __init__(self, searcher: Any) -> None:
        self.searcher = searcher
        self.inner: EngineSearcher | None = (
            None
            if searcher is None
            else engine_searcher(searcher, getattr(searcher, "param_space", None))
        )

    def bind(self, param_space: Mapping[str, Any] | None) -> None:
        """Give the run's space to a Tune searcher inside (the Tuner calls this)."""
        self.inner = engine_searcher(self.searcher, param_space)
        if isinstance(self.inner, Wrapper):
            self.inner.bind(param_space)

    def _in(self) -> EngineSearcher:
        assert self.inner is not None
        return self.inner

    @property
    def metric(self) -> Any:
        return getattr(self.searcher, "metric", None)

    @property
    def mode(self) -> Any:
        return getattr(self.searcher, "mode", None)

    def setup(
        self,
        space: SearchSpace,
        *,
        metric: str | None,
        mode: str | None,
        num_samples: int,
        seed: int | None,
    ) -> None:
        self._in().setup(space, metric=metric, mode=mode, num_samples=num_samples, seed=seed)

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        return self._in().suggest(trial_id)

    def on_trial_result(self, trial_id: str, result: Mapping[str, Any]) -> None:
        self._in().on_trial_result(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: Mapping[str, Any] | None, error: bool = False
    ) -> None:
        self._in().on_trial_complete(trial_id, result, error)

    def get_state(self) -> Any:
        return {"inner": self._in().get_state(), "own": self._own_state()}

    def set_state(self, state: Any) -> None:
        self._in().set_state(state["inner"])
        self._set_own_state(state["own"])

    def _own_state(self) -> Any:
        return None

    def _set_own_state(self, state: Any) -> None:
        return None


class ConcurrencyLimiter(Wrapper):
    """``ConcurrencyLimiter(searcher, max_concurrent, batch=False)``."""

    def __init__(self, searcher: Any, max_concurrent: int, batch: bool = False) -> None:
        if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int):
            raise ValueError(f"max_concurrent must be an int >= 1, got {max_concurrent!r}")
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1, got {max_concurrent}")
        super().__init__(searcher)
        self.max_concurrent = max_concurrent
        self.batch = batch
        self._live: set[str] = set()
        self._batch_open = True

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if len(self._live) >= self.max_concurrent:
            return None
        if self.batch and not self._batch_open:
            return None
        config = super().suggest(trial_id)
        if config is not None:
            self._live.add(trial_id)
            if self.batch and len(self._live) >= self.max_concurrent:
                self._batch_open = False
        return config

    def on_trial_complete(
        self, trial_id: str, result: Mapping[str, Any] | None, error: bool = False
    ) -> None:
        self._live.discard(trial_id)
        if not self._live:
            self._batch_open = True
        super().on_trial_complete(trial_id, result, error)

    def _own_state(self) -> Any:
        return {"live": sorted(self._live), "open": self._batch_open}

    def _set_own_state(self, state: Any) -> None:
        self._live, self._batch_open = set(state["live"]), bool(state["open"])
