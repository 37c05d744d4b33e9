"""Moved to :mod:`orchestrator.cli.demo`; this name stays importable for old code."""

from .cli.demo import *  # noqa: F403
from .cli.demo import (
    BASE_CONFIGS,
    THREAD_ENV_VARS,
    ActorKiller,
    Board,
    DemoOptions,
    Row,
    demo_main,
    final_rows,
    run_demo,
    sweep_configs,
    trial_table,
)

__all__ = [
    "BASE_CONFIGS",
    "THREAD_ENV_VARS",
    "ActorKiller",
    "Board",
    "DemoOptions",
    "Row",
    "demo_main",
    "final_rows",
    "run_demo",
    "sweep_configs",
    "trial_table",
]
