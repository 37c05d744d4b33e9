"""The dashboard: a live, read-only web view of the experiments in a storage.

``python -m orchestrator dashboard`` serves it (see :mod:`orchestrator.cli.dashboard`).
It reads journals as plain data, incrementally (:mod:`.tail`: a watched experiment
costs one small read a second), never imports or unpickles the trials' code, and never
writes to storage. Its pages are static files of this package (``static/``, with uPlot
and its license under ``static/vendor/``), so they work offline.

Needs aiohttp (the ``[dashboard]`` extra); importing this package imports it.
"""

from orchestrator.views.dashboard.server import Dashboard, RunningDashboard, running

__all__ = ["Dashboard", "RunningDashboard", "running"]
