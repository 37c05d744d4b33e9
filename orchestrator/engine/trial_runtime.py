"""The loop's record of one trial.

Everything about a trial that changes while it runs and is not decided by its state
machine lives here, written by the loop only: the live actor and its call counter, the
node it runs on, the result history, its current config (an exploit changes it), the
waiters of pending requests. The public ``orchestrator.Trial`` is a read-only view of
this record, attached as ``handle`` by the API layer, so nothing outside the loop
writes to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.core.codec import pickle_b64
from orchestrator.core.machine import TrialMachine, TrialPolicy
from orchestrator.core.spec import TrialSpec

if TYPE_CHECKING:
    from orchestrator.core.placement import Host


@dataclass
class Waiter:
    """A request's caller, waiting until ``done()``. ``after`` is the request's own
    event: ``done`` is asked only once the loop has handled it, since before that the
    trial is still as it was (a TERMINATED trial asked to restore has not "given up")."""

    done: Callable[[], bool]
    future: asyncio.Future[None]
    after: Any = None  # an Event, until handled


class Observer(Protocol):
    """Who watches a trial (its sweep): every result, every settling, and every move out
    of TERMINATED or ERROR (so the watcher may forget ended trials till then), on the
    loop."""

    def on_result(self, rt: TrialRuntime, result: Mapping[str, Any]) -> None: ...

    def on_settled(self, rt: TrialRuntime) -> None: ...

    def on_revived(self, rt: TrialRuntime) -> None: ...


#: One empty set for every record: ``frozenset()`` is a new object per call (issue 36).
_NO_KEYS: frozenset[str] = frozenset()

#: Events kept per trial for ``show`` and ``plot`` (restores, failures, exploits).
MAX_EVENTS = 200


class TrialRuntime:
    """One trial as the loop tracks it (see the module docstring)."""

    # Slots: every trial's record stays in the driver for the whole experiment (issue 36).
    __slots__ = (
        "spec",
        "machine",
        "config",
        "config_pickle",
        "results",
        "last_result",
        "discarded_results",
        "runs_started",
        "events",
        "stored_keys",
        "code_loaded",
        "node_id",
        "host_name",
        "actor",
        "host",
        "seq",
        "observer",
        "report_config",
        "waiters",
        "handle",
    )

    def __init__(
        self,
        spec: TrialSpec,
        policy: TrialPolicy,
        *,
        machine: TrialMachine | None = None,
        code_loaded: bool = True,
    ) -> None:
        self.spec = spec
        self.machine = machine or TrialMachine(spec.trial_id, policy)
        self.config: dict[str, Any] = dict(spec.config)
        # The config's pickle for the journal, once it is not the spec's any more.
        self.config_pickle: str | None = None
        self.results: list[dict[str, Any]] = []
        self.last_result: dict[str, Any] | None = None
        self.discarded_results = 0
        self.runs_started = 0
        self.events: list[dict[str, Any]] = []
        # Checkpoint keys storage held for the trial when a resumed driver adopted it:
        # a new save never reuses one (some may be an abandoned run's, still deleting).
        self.stored_keys: frozenset[str] = _NO_KEYS
        # A trial resumed from a journal that will not run was rebuilt without its code
        # (``TrialSpec.from_json(load_code=False)``); it is loaded if it runs again.
        self.code_loaded = code_loaded
        self.node_id: str | None = None
        self.host_name: str | None = None
        self.actor: Any = None
        self.host: Host | None = None
        self.seq = 0
        # The sweep a trial belongs to watches it: every result and every settling
        # (cheap calls on the loop; see ``sweep.Sweep``). None for a plain trial.
        self.observer: Observer | None = None
        self.report_config = False  # put its config in every result (configs change: PBT)
        self.waiters: list[Waiter] = []
        # The public view hooks receive (``orchestrator.Trial``), attached by the API.
        self.handle: Any = None

    @property
    def id(self) -> str:
        return self.spec.trial_id

    @property
    def state(self) -> Any:
        return self.machine.state

    def next_seq(self) -> int:
        seq = self.seq
        self.seq += 1
        return seq

    def set_config(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)
        self.config_pickle = pickle_b64(self.config)

    def note(self, kind: str, iteration: int, **details: Any) -> None:
        """Record an event for ``show`` and ``plot`` (bounded: the newest are kept)."""
        self.events.append({"kind": kind, "iteration": iteration, **details})
        if len(self.events) > MAX_EVENTS:
            del self.events[: len(self.events) - MAX_EVENTS]

    # -- waiters (requests awaiting their outcome) -----------------------------------

    def wake_waiters(self, handled: Any = None) -> None:
        """Resolve the waiters that are done, after the loop handled event ``handled``."""
        if not self.waiters:
            return
        still: list[Waiter] = []
        for waiter in self.waiters:
            if waiter.future.done():
                continue
            if waiter.after is not None and waiter.after is handled:
                waiter.after = None
            if waiter.after is None and waiter.done():
                waiter.future.set_result(None)
            else:
                still.append(waiter)
        self.waiters = still

    def fail_waiters(self, error: BaseException) -> None:
        for waiter in self.waiters:
            if not waiter.future.done():
                waiter.future.set_exception(error)
        self.waiters = []
