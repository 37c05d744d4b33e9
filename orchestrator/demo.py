"""Moved to :mod:`orchestrator.cli.demo`; this name stays importable for users' scripts
that imported the demo's options and runner from here before the move."""

from orchestrator.cli import demo as _moved
from orchestrator.cli.demo import *  # noqa: F403

__all__ = list(_moved.__all__)
