"""Kept importable for journals: a trial's stop condition is pickled into the journal,
and pickles written before the move name this module (:mod:`orchestrator.core.stopping`)."""

from orchestrator.core.stopping import *  # noqa: F403
from orchestrator.core.stopping import StopCondition, StopSpec

__all__ = ["StopCondition", "StopSpec"]
