"""The command line (``python -m orchestrator``): see :mod:`orchestrator.cli.main`.

The package is imported by every worker of the demo (its trainable lives in
:mod:`orchestrator.cli.demo_model`), so importing it loads the parser's modules only;
each command imports Ray, storage and the orchestrator when it runs.
"""

from __future__ import annotations

from orchestrator.cli.common import ray_session
from orchestrator.cli.main import COMMANDS, build_parser, main
from orchestrator.cli.present import results_table
from orchestrator.cli.run import expand_grid, load_trainable

__all__ = [
    "COMMANDS",
    "build_parser",
    "expand_grid",
    "load_trainable",
    "main",
    "ray_session",
    "results_table",
]
