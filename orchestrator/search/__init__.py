"""The sans-IO search layer: search spaces, and the searchers that pick trial configs.

Pure Python (no Ray, no asyncio): the sweep drives a :class:`Searcher` from a worker
thread, and tests drive it from a plain loop. Optuna is imported only when an
:class:`OptunaSearch` is built.
"""

from __future__ import annotations

from orchestrator.search.domains import (
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
from orchestrator.search.more_domains import (
    LogRandInt,
    QLogRandInt,
    QLogUniform,
    QRandInt,
    QRandN,
    RandN,
    lograndint,
    qlograndint,
    qloguniform,
    qrandint,
    qrandn,
    randn,
)
from orchestrator.search.numpy_search import NumpySearch
from orchestrator.search.optuna_search import OptunaSearch
from orchestrator.search.random_search import RandomSearch
from orchestrator.search.registry import (
    SearcherKind,
    register_searcher,
    searcher_kind,
    searcher_kinds,
)
from orchestrator.search.searcher import Searcher
from orchestrator.search.space import SearchSpace, space_from_json

#: The built-in kinds: what the command line and the Tune facade offer.
for _kind in (
    SearcherKind("random", RandomSearch, "random draws, every grid combination (the default)"),
    SearcherKind(
        "optuna",
        OptunaSearch,
        "Optuna's TPE (needs trialflow[optuna])",
        tune_classes=("optuna.OptunaSearch",),
    ),
    SearcherKind(
        "numpy",
        NumpySearch,
        "random draws from NumPy's generator, as Ray Tune's default searcher draws them",
        command_line=False,
        tune_classes=("BasicVariantGenerator",),
    ),
):
    register_searcher(_kind)
del _kind

__all__ = [
    "Choice",
    "Domain",
    "Grid",
    "LogRandInt",
    "LogUniform",
    "NumpySearch",
    "OptunaSearch",
    "QLogRandInt",
    "QLogUniform",
    "QRandInt",
    "QRandN",
    "QUniform",
    "RandN",
    "RandInt",
    "RandomSearch",
    "SampleFrom",
    "SearchSpace",
    "Searcher",
    "SearcherKind",
    "Uniform",
    "choice",
    "grid",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "register_searcher",
    "sample_from",
    "searcher_kind",
    "searcher_kinds",
    "space_from_json",
    "uniform",
]
