"""``ray.tune.tune_config``: :class:`TuneConfig`."""

from __future__ import annotations

from orchestrator.tune.config import TuneConfig

__all__ = ["TuneConfig"]
