"""Kept importable for journals: a trainable class defined in a script (``__main__``) is
journaled pickled by value, and its pickle names its base class by this module's path
as it was before the move (:mod:`orchestrator.actor.trainable`)."""

from orchestrator.actor.trainable import Trainable

__all__ = ["Trainable"]
