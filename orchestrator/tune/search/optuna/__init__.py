"""``ray.tune.search.optuna``: :class:`OptunaSearch`."""

from __future__ import annotations

from orchestrator.tune.search.optuna.optuna_search import OptunaSearch

__all__ = ["OptunaSearch"]
