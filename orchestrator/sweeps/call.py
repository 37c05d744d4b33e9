"""A ``sweep(...)`` call as one value, and what checking it makes of it: data only, shared
by the checks (:mod:`orchestrator.sweeps.preflight`) and the sweep that runs
(:mod:`orchestrator.sweeps.driver`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.core.options import TrialOptions
    from orchestrator.search import Searcher, SearchSpace

__all__ = ["SweepCall", "SweepPlan"]


@dataclass(frozen=True)
class SweepCall:
    """One ``sweep(...)`` call's arguments, as given (see ``Orchestrator.sweep``);
    :func:`plan_sweep` checks them. The trials' options are one value, checked already."""

    trainable: Any
    space: Any
    options: TrialOptions
    num_samples: Any = 1
    metric: Any = None
    mode: Any = None
    searcher: Any = None
    scheduler: Any = None
    max_concurrent_trials: Any = None
    seed: Any = None
    name: Any = "sweep"
    reuse_actors: Any = True
    fail_fast: Any = False

    def recorded(self, searcher: Searcher) -> str:
        """The call for the journal, as the keywords of ``sweep(...)`` (the options'
        too), so that a resumed driver, of this version or an older one, makes it again
        with ``sweep(**call)``; ``searcher`` is the one the sweep runs (the default's)."""
        from orchestrator.core.codec import pickle_b64

        given = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "options"}
        given.update(space=dict(self.space), searcher=searcher, **self.options.keywords())
        return pickle_b64(given)


@dataclass(frozen=True)
class SweepPlan:
    """What checking a call makes of it: the space as a SearchSpace, and the searcher
    (the default one when the call gave none)."""

    space: SearchSpace
    searcher: Searcher
