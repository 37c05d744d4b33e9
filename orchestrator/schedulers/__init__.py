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

#: The built-in kinds: what the command line and the Tune facade offer.
for _kind in (
    SchedulerKind(
        "fifo", FIFO, "none: trials run to their --stop", tune_classes=("FIFOScheduler",)
    ),
    SchedulerKind(
        "asha",
        ASHA,
        "asynchronous successive halving (uses --max-t)",
        takes_max_t=True,
        tune_classes=("ASHAScheduler", "AsyncHyperBandScheduler"),
    ),
    SchedulerKind(
        "hyperband",
        HyperBand,
        "synchronous HyperBand brackets (uses --max-t)",
        takes_max_t=True,
        tune_classes=("HyperBandScheduler",),
    ),
    SchedulerKind(
        "median",
        MedianStopping,
        "stop a trial below the median of the others at the same time",
        tune_classes=("MedianStoppingRule",),
    ),
    SchedulerKind(
        "pbt",
        PBT,
        "population based training (needs its mutations: from Python only)",
        command_line=False,
        tune_classes=("PopulationBasedTraining",),
    ),
):
    register_scheduler(_kind)
del _kind

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
