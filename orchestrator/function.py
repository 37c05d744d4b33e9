"""Kept importable for journals: a function trainable is journaled as a pickled subclass
of :class:`FunctionTrainable`, and pickles written before the move name this module
(:mod:`orchestrator.actor.function`)."""

from orchestrator.actor.function import *  # noqa: F403
from orchestrator.actor.function import FunctionTrainable, get_checkpoint, report

__all__ = ["FunctionTrainable", "get_checkpoint", "report"]
