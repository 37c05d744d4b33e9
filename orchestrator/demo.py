"""Moved to :mod:`orchestrator.cli.demo`; this name stays importable for old code."""

from .cli import demo as _moved
from .cli.demo import *  # noqa: F403

__all__ = list(_moved.__all__)
