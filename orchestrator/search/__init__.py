"""The sans-IO search layer: search spaces, and the searchers that pick trial configs.

Pure Python (no Ray, no asyncio): the sweep drives a :class:`Searcher` from a worker
thread, and tests drive it from a plain loop. Optuna is imported only when an
:class:`OptunaSearch` is built.
"""

from __future__ import annotations

from .domains import (
    Choice,
    Domain,
    Grid,
    LogUniform,
    QUniform,
    RandInt,
    SampleFrom,
    Uniform,
    choice,
    grid,
    loguniform,
    quniform,
    randint,
    sample_from,
    uniform,
)
from .optuna_search import OptunaSearch
from .random_search import RandomSearch
from .searcher import Searcher
from .space import SearchSpace, space_from_json

__all__ = [
    "Choice",
    "Domain",
    "Grid",
    "LogUniform",
    "OptunaSearch",
    "QUniform",
    "RandInt",
    "RandomSearch",
    "SampleFrom",
    "SearchSpace",
    "Searcher",
    "Uniform",
    "choice",
    "grid",
    "loguniform",
    "quniform",
    "randint",
    "sample_from",
    "space_from_json",
    "uniform",
]
