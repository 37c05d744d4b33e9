"""Ray Tune's ``HyperBandScheduler``: trialflow's HyperBand (trials pause at their
bracket's milestone, freeing their resources; the best resume)."""

from __future__ import annotations

from orchestrator.schedulers import HyperBand
from orchestrator.tune.schedulers.base import TuneScheduler

__all__ = ["HyperBandScheduler"]


class HyperBandScheduler(TuneScheduler, HyperBand):
    """HyperBand with Tune's arguments: ``time_attr`` ("training_iteration"), ``metric``,
    ``mode``, ``max_t`` (81), ``reduction_factor`` (3), ``stop_last_trials`` (True),
    which are trialflow's HyperBand's own (its ``__init__`` serves unchanged)."""
