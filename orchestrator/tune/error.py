"""``ray.tune.error``: :class:`TuneError`."""

from __future__ import annotations

from orchestrator.tune.errors import TuneError

__all__ = ["TuneError"]
