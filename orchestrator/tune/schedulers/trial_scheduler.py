"""Ray Tune's ``ray.tune.schedulers.trial_scheduler``: the FIFO scheduler. A scheduler of
your own subclasses ``orchestrator.schedulers.Scheduler`` (decisions as data)."""

from __future__ import annotations

from orchestrator.tune.schedulers.base import FIFOScheduler
from orchestrator.tune.unsupported import getattr_for

__all__ = ["FIFOScheduler"]

__getattr__ = getattr_for("schedulers")
