"""A sweep's scheduler's state for the journal, pickled again only when it may have
changed.

The head carries the scheduler's ``state_dict()`` at every write. For ASHA, HyperBand
or PBT that state is O(trials) by nature (ASHA keeps every trial's record at each rung:
560 KiB pickled at 10,000 trials, 17 ms of the loop's time), and a write comes while
nothing was asked of the scheduler (results of other trials, a finished sweep beside
new trials). The sweep says when it asked the scheduler anything (:meth:`touched`: its
state can change only in its own calls); otherwise a write reuses the last pickle.
"""

from __future__ import annotations

from orchestrator.core.codec import pickle_b64
from orchestrator.schedulers import Scheduler

__all__ = ["SchedulerState"]


class SchedulerState:
    """The newest pickle of ``scheduler``'s state (see the module docstring)."""

    __slots__ = ("_scheduler", "_pickle", "pickles")

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._pickle: str | None = None  # None: stale
        self.pickles = 0  # how many times it was pickled (the tests count)

    def touched(self) -> None:
        """The scheduler was called: its state may have changed."""
        self._pickle = None

    def pickle(self) -> str:
        """``pickle_b64(scheduler.state_dict())``, as of now."""
        if self._pickle is None:
            self._pickle = pickle_b64(self._scheduler.state_dict())
            self.pickles += 1
        return self._pickle
