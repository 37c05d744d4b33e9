"""The registry of schedulers: each kind once, with what every front end needs of it.

The command line (``run --scheduler NAME``), the Ray Tune facade's checks and messages
(:mod:`orchestrator.tune.plan`) and ``tests/schedulers/test_registry.py`` all read
:data:`_BUILT_IN`. Adding a scheduler is its module (a :class:`Scheduler` subclass,
with :meth:`~Scheduler.state_dict` and, if people should see something of it, a
:meth:`~Scheduler.display`) and one entry here; the registry's test then holds it to
what the others do (its journal state survives a reload, its display is declared, the
command line and the facade list it). Its export from :mod:`orchestrator.schedulers`
is checked by that test too.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.schedulers.asha import ASHA
from orchestrator.schedulers.base import FIFO, Scheduler
from orchestrator.schedulers.hyperband import HyperBand
from orchestrator.schedulers.median import MedianStopping
from orchestrator.schedulers.pbt import PBT

__all__ = ["SchedulerKind", "register_scheduler", "scheduler_kind", "scheduler_kinds"]


@dataclass(frozen=True)
class SchedulerKind:
    """One kind of scheduler and how the front ends offer it.

    ``name`` is its command-line name (``--scheduler NAME``) and ``help`` one line about
    it there; ``command_line`` is False for a scheduler the command line cannot build
    (PBT needs its mutations); the command line passes ``--max-t`` to one that
    ``takes_max_t``. ``tune_classes`` names its classes in
    :mod:`orchestrator.tune.schedulers` (Ray Tune's names; the first is the one an error
    suggests), empty for a scheduler Tune does not have."""

    name: str
    cls: type[Scheduler]
    help: str
    takes_max_t: bool = False
    command_line: bool = True
    tune_classes: tuple[str, ...] = ()


_BUILT_IN = (
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
)

_KINDS: dict[str, SchedulerKind] = {kind.name: kind for kind in _BUILT_IN}


def register_scheduler(kind: SchedulerKind) -> None:
    """Offer ``kind`` (replacing a registered one of that name)."""
    if not (isinstance(kind.cls, type) and issubclass(kind.cls, Scheduler)):
        raise TypeError(f"scheduler {kind.name!r}: {kind.cls!r} is not a Scheduler class")
    _KINDS[kind.name] = kind


def scheduler_kinds() -> tuple[SchedulerKind, ...]:
    """Every registered kind, built-in ones first."""
    return tuple(_KINDS.values())


def scheduler_kind(name: str) -> SchedulerKind:
    """The registered kind called ``name`` (KeyError: none)."""
    return _KINDS[name]
