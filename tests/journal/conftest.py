"""The journal's tests: the finished experiment the repair tests damage, one per module."""

from ..support.finished_experiment import finished  # noqa: F401
