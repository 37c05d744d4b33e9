"""The registry of searchers: each kind once, with what every front end needs of it.

The command line (``run --searcher NAME``) reads it, and
``tests/search/test_registry.py`` holds every registered kind to what the others do
(its state survives the journal: a fresh one given it suggests what the old one would
have; the command line and the Ray Tune facade list it). Adding a searcher is its
module (a :class:`Searcher` subclass) plus one :func:`register_searcher` call beside
its export in ``search/__init__.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

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


#: Every registered kind by name (``search/__init__.py`` registers the built-in ones).
_KINDS: dict[str, SearcherKind] = {}


def register_searcher(kind: SearcherKind) -> None:
    """Offer ``kind`` (replacing a registered one of that name)."""
    if not (isinstance(kind.cls, type) and issubclass(kind.cls, Searcher)):
        raise TypeError(f"searcher {kind.name!r}: {kind.cls!r} is not a Searcher class")
    _KINDS[kind.name] = kind


def searcher_kinds() -> tuple[SearcherKind, ...]:
    """Every registered kind, in the order registered (built-in ones first)."""
    return tuple(_KINDS.values())


def searcher_kind(name: str) -> SearcherKind:
    """The registered kind called ``name`` (KeyError: none)."""
    return _KINDS[name]
