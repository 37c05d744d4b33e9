"""Trial schedulers: sans-IO policies that turn trial events into decisions (as data).

The engine feeds a scheduler trial snapshots (:class:`TrialInfo`) and a view of the
population, and carries out the :class:`Decision` objects it returns. Nothing here
imports Ray or asyncio; see :mod:`orchestrator.schedulers.base` for the contract.
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
    Stop,
    TrialInfo,
)
from orchestrator.schedulers.hyperband import HyperBand
from orchestrator.schedulers.median import MedianStopping
from orchestrator.schedulers.pbt import PBT

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
]
