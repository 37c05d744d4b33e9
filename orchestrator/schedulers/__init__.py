"""Trial schedulers: sans-IO policies that turn trial events into decisions (as data).

The engine feeds a scheduler trial snapshots (:class:`TrialInfo`) and a view of the
population, and carries out the :class:`Decision` objects it returns. Nothing here
imports Ray or asyncio; see :mod:`orchestrator.schedulers.base` for the contract, and
:mod:`orchestrator.schedulers.registry` for the kinds the front ends offer.
"""

from __future__ import annotations

from orchestrator.schedulers.asha import ASHA
from orchestrator.schedulers.base import (
    FIFO,
    Continue,
    Decision,
    Exploit,
    Hold,
    Pause,
    Population,
    Resume,
    Scheduler,
    SchedulerDisplay,
    Stop,
    TrialInfo,
)
from orchestrator.schedulers.hyperband import HyperBand
from orchestrator.schedulers.median import MedianStopping
from orchestrator.schedulers.pbt import PBT
from orchestrator.schedulers.registry import (
    SchedulerKind,
    register_scheduler,
    scheduler_kind,
    scheduler_kinds,
)

__all__ = [
    "Scheduler",
    "FIFO",
    "ASHA",
    "HyperBand",
    "MedianStopping",
    "PBT",
    "TrialInfo",
    "Population",
    "Decision",
    "Continue",
    "Stop",
    "Pause",
    "Hold",
    "Resume",
    "Exploit",
    "SchedulerDisplay",
    "SchedulerKind",
    "register_scheduler",
    "scheduler_kind",
    "scheduler_kinds",
]
