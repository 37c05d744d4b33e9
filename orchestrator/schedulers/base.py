"""The scheduler interface: trial snapshots in, decisions (as data) out.

A scheduler is sans-IO. The engine calls it synchronously from its event-loop thread with
a snapshot of the reporting trial and a read-only view of the whole population; the
scheduler answers with a list of :class:`Decision` objects and never calls back into the
runner. Every call is cheap (O(trials in the rung or bracket) at worst, typically O(1) or
O(log n)) and does no I/O, so it can sit on the loop's hot path.

The decisions are the trial machine's own (:mod:`orchestrator.core.decisions`,
re-exported here): a scheduler's ``Stop`` is carried out exactly as a user's
``trial.stop()``, and :class:`Exploit` is the restore with a new config that a user's
``trial.restore(checkpoint, config=...)`` makes.

Rules every scheduler here follows, which the engine may rely on:

* at most one decision per trial per returned list; no decision about the reporting
  trial means :class:`Continue`;
* :class:`Resume` only for a trial that is PAUSED in the population, :class:`Exploit`
  only from a donor whose ``checkpoint`` is not ``None``;
* a trial told to :class:`Hold` is released by a later decision about it, from
  :meth:`Scheduler.on_idle` at the latest (the engine calls it when the held trials'
  wait cannot end by itself);
* a rung, milestone or boundary already decided for a trial is never decided again: a
  trial that restarts from an older checkpoint and re-reports earlier iterations gets
  the same outcome without a second record;
* results lacking ``time_attr`` or the metric are ignored (no decision); a NaN metric
  ranks worst;
* :meth:`Scheduler.state_dict` holds plain data only (no checkpoints), enough for a fresh
  scheduler built with the same arguments to continue identically.
"""

from __future__ import annotations

import abc
import math
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeGuard

from orchestrator.core.decisions import (
    Continue,
    Decision,
    Hold,
    Pause,
    RestoreFrom,
    Resume,
    Stop,
)
from orchestrator.errors import ConfigError

__all__ = [
    "FIFO",
    "TERMINAL_STATES",
    "Continue",
    "Decision",
    "Exploit",
    "Hold",
    "Pause",
    "Population",
    "ResumeQueue",
    "Resume",
    "Scheduler",
    "SchedulerDisplay",
    "Stop",
    "TrialInfo",
    "check_number",
    "is_live",
    "rng_state",
    "set_rng_state",
]

#: Trial states in which nothing will ever happen to the trial again.
TERMINAL_STATES = frozenset({"TERMINATED", "ERROR"})


@dataclass(frozen=True)
class TrialInfo:
    """What a scheduler sees of one trial (a snapshot at the time of the call)."""

    trial_id: str
    config: Mapping[str, Any]
    state: str  # "PENDING" | "STARTING" | "RESTORING" | "RUNNING" | "PAUSED" | ...
    iteration: int  # training_iteration of its newest result (0: none yet)
    last_result: Mapping[str, Any] | None
    checkpoint: Any = None  # newest *persisted* checkpoint (has .iteration); None: none yet


#: Every trial of the sweep, by id (a read-only, live view).
Population = Mapping[str, TrialInfo]


@dataclass(frozen=True, init=False)
class Exploit(RestoreFrom):
    """Restore ``trial_id`` from ``checkpoint`` (trial ``donor_id``'s) and go on with
    ``config``: the scheduler's restore with a new config, carried out as any
    :class:`~orchestrator.core.decisions.RestoreFrom` (a user's ``trial.restore()``)."""

    donor_id: str
    config: Mapping[str, Any]

    def __init__(
        self, trial_id: str, donor_id: str, checkpoint: Any, config: Mapping[str, Any]
    ) -> None:
        object.__setattr__(self, "trial_id", trial_id)
        object.__setattr__(self, "checkpoint", checkpoint)
        object.__setattr__(self, "config", config)
        object.__setattr__(self, "donor_id", donor_id)


@dataclass(frozen=True)
class SchedulerDisplay:
    """What a scheduler shows people of itself (the dashboard, ``inspect``): the
    journal's head records it beside :meth:`Scheduler.state_dict`, which is a pickle no
    reader opens. Empty fields are not recorded."""

    #: PBT's exploits, one mapping each (``trial_id``, ``time``, ``donor_id``,
    #: ``donor_checkpoint_iteration``, ``old_config``, ``new_config``).
    lineage: tuple[Mapping[str, Any], ...] = ()
    #: Each bracket's rung milestones, ascending (ASHA's).
    rungs: tuple[tuple[float, ...], ...] = ()

    def journal_fields(self) -> dict[str, Any]:
        """The fields as the journal's sweep record holds them (JSON lists)."""
        fields: dict[str, Any] = {}
        if self.lineage:
            fields["lineage"] = [dict(exploit) for exploit in self.lineage]
        if self.rungs:
            fields["rungs"] = [list(milestones) for milestones in self.rungs]
        return fields


def is_live(info: TrialInfo | None) -> TypeGuard[TrialInfo]:
    """The trial exists and has not ended (neither TERMINATED nor ERROR)."""
    return info is not None and info.state not in TERMINAL_STATES


def rng_state(rng: random.Random) -> list[Any]:
    """``rng``'s state as plain data (lists survive JSON as well as pickle)."""
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def set_rng_state(rng: random.Random, state: list[Any] | tuple[Any, ...]) -> None:
    """Undo :func:`rng_state`."""
    version, internal, gauss = state
    rng.setstate((version, tuple(internal), gauss))


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_number(
    name: str,
    value: Any,
    ok: Callable[[float], bool] = lambda v: 0 < v < math.inf,
    what: str = "a positive number",
) -> None:
    """ConfigError naming ``name`` unless ``value`` is a number (not a bool) and ``ok``."""
    if not _is_number(value) or not ok(value):
        raise ConfigError(f"{name} must be {what}, got {value!r}")


class Scheduler(abc.ABC):
    """Base of every scheduler: holds the objective and reads times and scores from results.

    Subclasses that rank trials set ``needs_objective = True``: they refuse to run without
    a metric and a mode (``set_search_properties`` fills in whichever was left ``None``).
    """

    needs_objective: ClassVar[bool] = True

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
    ) -> None:
        if not isinstance(time_attr, str) or not time_attr:
            raise ConfigError(f"time_attr must be a result key (a string), got {time_attr!r}")
        if metric is not None and not isinstance(metric, str):
            raise ConfigError(f"metric must be a result key (a string) or None, got {metric!r}")
        if mode is not None and mode not in ("min", "max"):
            raise ConfigError(f"mode must be 'min' or 'max' (or None), got {mode!r}")
        self.time_attr = time_attr
        self.metric = metric
        self.mode = mode

    # -- the interface --------------------------------------------------------------

    def set_search_properties(self, metric: str | None, mode: str | None) -> None:
        """Fill in metric/mode from the sweep where the scheduler was given None.

        Raises ConfigError when a scheduler that needs them still has none, or mode is not
        'min'/'max'. Values given to the constructor win over the sweep's.
        """
        if self.metric is None:
            self.metric = metric
        if self.mode is None:
            self.mode = mode
        self._check_objective()

    def on_trial_add(self, trial: TrialInfo) -> None:
        """A trial joined the sweep (before it reports anything)."""
        self._check_objective()

    @abc.abstractmethod
    def on_trial_result(
        self, trial: TrialInfo, result: Mapping[str, Any], population: Population
    ) -> list[Decision]:
        """The trial reported ``result``; decide about it (and possibly about others)."""

    def on_trial_complete(
        self, trial: TrialInfo, result: Mapping[str, Any] | None, population: Population
    ) -> list[Decision]:
        """The trial ended TERMINATED by itself (its stop condition). Default: nothing."""
        return []

    def on_trial_error(self, trial: TrialInfo, population: Population) -> list[Decision]:
        """The trial ended in ERROR. Default: nothing."""
        return []

    def on_idle(self, population: Population) -> list[Decision]:
        """The population cannot move on by itself: no trial runs and none will be
        added, but some are PAUSED; or some are held (:class:`Hold`) and no other has
        made progress for a while. Decide their fate.

        Default: nothing.
        """
        return []

    def next_decision_at(self, trial: TrialInfo) -> float | None:
        """The smallest ``time_attr`` value past the trial's current one at which this
        scheduler must see its result before it trains further; None: no such point."""
        return None

    def display(self) -> SchedulerDisplay:
        """What people are shown of this scheduler (cheap: called at each journal
        write). Default: nothing."""
        return SchedulerDisplay()

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Plain, picklable data: everything needed to continue after a driver crash."""

    @abc.abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state_dict()`` (on a scheduler built with the same arguments)."""

    # -- helpers for subclasses -----------------------------------------------------

    def _check_objective(self) -> None:
        name = type(self).__name__
        if self.mode is not None and self.mode not in ("min", "max"):
            raise ConfigError(f"{name}: mode must be 'min' or 'max', got {self.mode!r}")
        if self.needs_objective and (self.metric is None or self.mode is None):
            raise ConfigError(
                f"{name} needs a metric and a mode (got metric={self.metric!r}, "
                f"mode={self.mode!r}): pass metric=... and mode='min' or 'max' to {name}(...) "
                "or to the sweep"
            )

    def _time_of(self, result: Mapping[str, Any] | None) -> float | None:
        """The result's ``time_attr`` value; None when it lacks one (or it is no number)."""
        if result is None:
            return None
        value = result.get(self.time_attr)
        return value if _is_number(value) else None

    def _score_of(self, result: Mapping[str, Any] | None) -> float | None:
        """The result's metric as a score where higher is better; None when the result
        has no numeric metric. NaN and the infinities score -inf, the worst, in either
        mode: a diverged trial is never the best (the one rule for best everywhere,
        :mod:`orchestrator.core.best`), whichever way it diverged."""
        if result is None or self.metric is None:
            return None
        raw = result.get(self.metric)
        if not _is_number(raw):
            return None
        value = float(raw)
        if not math.isfinite(value):
            return -math.inf
        return value if self.mode == "max" else -value

    def _current_time(self, trial: TrialInfo) -> float:
        """The trial's current ``time_attr`` value (0 before its first result)."""
        if self.time_attr == "training_iteration":
            return trial.iteration
        value = self._time_of(trial.last_result)
        return 0 if value is None else value


class FIFO(Scheduler):
    """No scheduling: every trial trains until its own stop condition."""

    needs_objective = False

    def __init__(self) -> None:
        super().__init__()

    def on_trial_result(
        self, trial: TrialInfo, result: Mapping[str, Any], population: Population
    ) -> list[Decision]:
        return []

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


class ResumeQueue:
    """Trials a scheduler decided to resume whose pause has not landed yet.

    A trial told to Pause may still show RUNNING (saving) when the scheduler decides to
    keep it; Resume is only legal once it is PAUSED, so the decision waits here and is
    handed out by the first later call that sees it PAUSED (``on_idle`` at the latest,
    which the engine calls once nothing runs). A trial that reports again, or ends, leaves.
    """

    def __init__(self) -> None:
        self._ids: set[str] = set()

    def add(self, trial_id: str) -> None:
        self._ids.add(trial_id)

    def discard(self, trial_id: str) -> None:
        self._ids.discard(trial_id)

    def __contains__(self, trial_id: object) -> bool:
        return trial_id in self._ids

    def flush(self, population: Population, skip: Iterable[str] = ()) -> list[Decision]:
        """Resume decisions for the waiting trials that are PAUSED now (not ``skip``)."""
        if not self._ids:
            return []
        skipped = set(skip)
        out: list[Decision] = []
        for trial_id in sorted(self._ids):
            info = population.get(trial_id)
            if not is_live(info):
                self._ids.discard(trial_id)
            elif info is not None and info.state == "PAUSED" and trial_id not in skipped:
                self._ids.discard(trial_id)
                out.append(Resume(trial_id))
        return out

    def to_list(self) -> list[str]:
        return sorted(self._ids)

    def load(self, ids: Iterable[str]) -> None:
        self._ids = set(ids)
