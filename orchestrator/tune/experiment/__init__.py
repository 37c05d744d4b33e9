"""``ray.tune.experiment``: ``Trial``, the type of the ``trial`` callbacks receive."""

from __future__ import annotations

from orchestrator.tune.tune_trial import TuneTrial as Trial

__all__ = ["Trial"]
