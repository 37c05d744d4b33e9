"""Ray Tune's searchers (``ray.tune.search``): ``BasicVariantGenerator`` (the default),
``ConcurrencyLimiter``, ``Repeater``, the ``Searcher`` base class, and
``OptunaSearch`` in :mod:`orchestrator.tune.search.optuna`."""

from __future__ import annotations

from orchestrator.tune.sample import grid_search
from orchestrator.tune.search.basic_variant import BasicVariantGenerator
from orchestrator.tune.search.concurrency_limiter import ConcurrencyLimiter
from orchestrator.tune.search.repeater import Repeater
from orchestrator.tune.search.searcher import Searcher
from orchestrator.tune.unsupported import getattr_for

__all__ = [
    "BasicVariantGenerator",
    "ConcurrencyLimiter",
    "Repeater",
    "Searcher",
    "grid_search",
]

__getattr__ = getattr_for("search")
