"""Ray Tune's ``Repeater``: each config the searcher suggests runs ``repeat`` times (with
``__trial_index__`` in the config when ``set_index``); the searcher hears once per group,
with the mean of the group's metric."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from orchestrator.tune.search.concurrency_limiter import Wrapper

__all__ = ["TRIAL_INDEX", "Repeater"]

TRIAL_INDEX = "__trial_index__"


class Repeater(Wrapper):
    """``Repeater(searcher, repeat=1, set_index=True)``."""

    def __init__(self, searcher: Any, repeat: int = 1, set_index: bool = True) -> None:
        super().__init__(searcher)
        self.repeat = repeat
        self._set_index = set_index
        self._groups: list[dict[str, Any]] = []  # {"primary", "config", "members", "scores"}
        self._group_of: dict[str, int] = {}
        self._metric: str | None = None

    def setup(self, space: Any, **kwargs: Any) -> None:
        super().setup(space, **kwargs)
        self._metric = getattr(self.searcher, "metric", None) or kwargs.get("metric")

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        group = self._groups[-1] if self._groups else None
        if group is None or len(group["members"]) >= self.repeat:
            config = super().suggest(trial_id)
            if config is None:
                return None
            group = {"primary": trial_id, "config": dict(config), "members": [], "scores": {}}
            self._groups.append(group)
        index = len(group["members"])
        group["members"].append(trial_id)
        self._group_of[trial_id] = len(self._groups) - 1
        config = dict(group["config"])
        if self._set_index:
            config[TRIAL_INDEX] = index
        return config

    def on_trial_result(self, trial_id: str, result: Mapping[str, Any]) -> None:
        return None  # the searcher hears of the group as a whole, at its end

    def on_trial_complete(
        self, trial_id: str, result: Mapping[str, Any] | None, error: bool = False
    ) -> None:
        index = self._group_of.get(trial_id)
        if index is None:
            return
        group = self._groups[index]
        value = (result or {}).get(self._metric) if self._metric else None
        score = float(value) if isinstance(value, (int, float)) else math.nan
        group["scores"][trial_id] = score
        if len(group["scores"]) == self.repeat:
            finite = [s for s in group["scores"].values() if not math.isnan(s)]
            mean = sum(finite) / len(finite) if finite else math.nan
            metric = self._metric or "metric"
            super().on_trial_complete(group["primary"], {metric: mean}, error=not finite)

    def _own_state(self) -> Any:
        return {"groups": self._groups, "group_of": self._group_of}

    def _set_own_state(self, state: Any) -> None:
        self._groups, self._group_of = state["groups"], state["group_of"]
