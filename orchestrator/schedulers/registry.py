"""The registry of schedulers: each kind once, with what every front end needs of it.

The command line (``run --scheduler NAME``), the Ray Tune facade's messages
(:mod:`orchestrator.tune.run_plan`) and the tests read it. Adding a scheduler is its module
(a :class:`Scheduler` subclass, with :meth:`~Scheduler.state_dict` and, if people
should see something of it, :meth:`~Scheduler.display`) and one
:func:`register_scheduler` call beside its export in ``schedulers/__init__.py``; the
tests then hold it to what the others do (its journal state survives a reload, its
display is declared and follows the state, the command line and the facade list it).
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.schedulers.base import Scheduler

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


#: Every registered kind by name (``schedulers/__init__.py`` registers the built-in ones).
_KINDS: dict[str, SchedulerKind] = {}


def register_scheduler(kind: SchedulerKind) -> None:
    """Offer ``kind`` (replacing a registered one of that name)."""
    if not (isinstance(kind.cls, type) and issubclass(kind.cls, Scheduler)):
        raise TypeError(f"scheduler {kind.name!r}: {kind.cls!r} is not a Scheduler class")
    _KINDS[kind.name] = kind


def scheduler_kinds() -> tuple[SchedulerKind, ...]:
    """Every registered kind, in the order registered (built-in ones first)."""
    return tuple(_KINDS.values())


def scheduler_kind(name: str) -> SchedulerKind:
    """The registered kind called ``name`` (KeyError: none)."""
    return _KINDS[name]
