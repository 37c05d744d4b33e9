"""The registry of searchers: each kind once, with what every front end needs of it.

The command line (``run --searcher NAME``) builds a kind from this table, and
``tests/search/test_registry.py`` holds every registered kind to what the others do
(its state survives the journal: a fresh one given it suggests what the old one would
have; the command line and the Ray Tune facade list it). Adding a searcher is its
module (a :class:`Searcher` subclass) plus one entry in :data:`_BUILT_IN`; its export
from :mod:`orchestrator.search` is checked by that test too.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.search.numpy_search import NumpySearch
from orchestrator.search.optuna_search import OptunaSearch
from orchestrator.search.random_search import RandomSearch
from orchestrator.search.searcher import Searcher

__all__ = ["SearcherKind", "register_searcher", "searcher_kind", "searcher_kinds"]


@dataclass(frozen=True)
class SearcherKind:
    """One kind of searcher and how the front ends offer it.

    ``name`` is its command-line name (``--searcher NAME``), built there as
    ``cls(seed=...)``, and ``help`` one line about it; ``command_line`` is False for one
    the command line does not offer. ``tune_classes`` names its classes in the facade,
    relative to :mod:`orchestrator.tune.search` (``"optuna.OptunaSearch"``)."""

    name: str
    cls: type[Searcher]
    help: str
    command_line: bool = True
    tune_classes: tuple[str, ...] = ()


_BUILT_IN = (
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
)

_KINDS: dict[str, SearcherKind] = {kind.name: kind for kind in _BUILT_IN}


def register_searcher(kind: SearcherKind) -> None:
    """Offer ``kind`` (replacing a registered one of that name)."""
    if not (isinstance(kind.cls, type) and issubclass(kind.cls, Searcher)):
        raise TypeError(f"searcher {kind.name!r}: {kind.cls!r} is not a Searcher class")
    _KINDS[kind.name] = kind


def searcher_kinds() -> tuple[SearcherKind, ...]:
    """Every registered kind, built-in ones first."""
    return tuple(_KINDS.values())


def searcher_kind(name: str) -> SearcherKind:
    """The registered kind called ``name`` (KeyError: none)."""
    return _KINDS[name]
