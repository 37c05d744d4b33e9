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
from orchestrator.core.machine import TrialMachine, TrialPolicy, TrialState
from orchestrator.core.spec import TrialSpec

if TYPE_CHECKING:
    from orchestrator.core.placement import Host
    from orchestrator.engine.tombstone import Sealed, Sealer, Unsealed


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

#: One empty list of waiters for every record that has none (issue 36); never changed
#: in place: :meth:`TrialRuntime.add_waiter` gives a record a list of its own.
_NO_WAITERS: list[Waiter] = []

#: Events kept per trial for ``show`` and ``plot`` (restores, failures, exploits).
MAX_EVENTS = 200


class TrialRuntime:
    """One trial as the loop tracks it (see the module docstring)."""

    # Slots: every trial's record stays in the driver for the whole experiment (issue 36).
    __slots__ = (
        "_id",
        "_spec",
        "_machine",
        "_config",
        "_events",
        "_sealed",
        "config_pickle",
        "results",
        "last_result",
        "discarded_results",
        "runs_started",
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
        self._id = spec.trial_id
        self._spec = spec
        self._machine = machine or TrialMachine(spec.trial_id, policy)
        self._config: dict[str, Any] = dict(spec.config)
        self._events: list[dict[str, Any]] = []
        # A finished trial's tombstone: where its spec, machine, config and events went
        # (``engine/tombstone.py``); None while they are live.
        self._sealed: Sealed | None = None
        # The config's pickle for the journal, once it is not the spec's any more.
        self.config_pickle: str | None = None
        self.results: list[dict[str, Any]] = []
        self.last_result: dict[str, Any] | None = None
        self.discarded_results = 0
        self.runs_started = 0
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
        self.waiters: list[Waiter] = _NO_WAITERS  # a list of its own at the first
        # The public view hooks receive (``orchestrator.Trial``), attached by the API.
        self.handle: Any = None

    @property
    def id(self) -> str:
        return self._id

    # -- the parts a finished trial seals (``engine/tombstone.py``) ---------------------
    # Reading one of them on a sealed trial brings them all back for good: the loop is
    # about to change the trial. Readers that change nothing use :meth:`peek`.

    @property
    def spec(self) -> TrialSpec:
        try:
            return self._spec
        except AttributeError:
            return self._unseal().spec

    @spec.setter
    def spec(self, spec: TrialSpec) -> None:
        self._unsealed()
        self._spec = spec

    @property
    def machine(self) -> TrialMachine:
        try:
            return self._machine
        except AttributeError:
            return self._unseal().machine

    @machine.setter
    def machine(self, machine: TrialMachine) -> None:
        self._unsealed()
        self._machine = machine

    @property
    def config(self) -> dict[str, Any]:
        try:
            return self._config
        except AttributeError:
            return self._unseal().config

    @config.setter
    def config(self, config: dict[str, Any]) -> None:
        self._unsealed()
        self._config = config

    @property
    def events(self) -> list[dict[str, Any]]:
        try:
            return self._events
        except AttributeError:
            return self._unseal().events

    @events.setter
    def events(self, events: list[dict[str, Any]]) -> None:
        self._unsealed()
        self._events = events

    @property
    def state(self) -> TrialState:
        try:
            return self._machine.state
        except AttributeError:
            assert self._sealed is not None
            return self._sealed.state

    @property
    def iteration(self) -> int:
        try:
            return self._machine.iteration
        except AttributeError:
            assert self._sealed is not None
            return self._sealed.iteration

    @property
    def pinned(self) -> frozenset[str]:
        """The checkpoint keys the trial keeps from deletion (``TrialMachine.pinned``)."""
        try:
            return self._machine.pinned
        except AttributeError:
            assert self._sealed is not None
            return self._sealed.pinned or _NO_KEYS

    @property
    def sealed(self) -> bool:
        return self._sealed is not None

    def peek(self) -> TrialRuntime | Unsealed:
        """The trial's spec, machine, config and events, to read only: the live ones, or
        a sealed trial's opened afresh (nothing is kept, the trial stays sealed)."""
        sealed = self._sealed
        return self if sealed is None else sealed.open()

    def seal(self, sealer: Sealer) -> bool | None:
        """Put the spec, machine, config and events in ``sealer``'s store and let them
        go, if the trial is over: ended, with no actor, nothing in flight, nobody waiting
        (see ``engine/tombstone.py``). None: not yet (ask again later); False: never
        (its parts do not pickle); it stays as it was."""
        if self._sealed is not None:
            return True
        machine = self._machine
        if (
            not machine.state.is_terminal
            or not machine.state.is_settled
            or self.waiters
            or self.actor is not None
            or self.host is not None
            or machine.train_in_flight
            or machine.saves_in_flight
        ):
            return None
        sealed = sealer.seal(self._spec, machine, self._config, self._events)
        if sealed is None:
            return False
        self._sealed = sealed
        del self._spec, self._machine, self._config, self._events
        return True

    def _unseal(self) -> Unsealed:
        sealed = self._sealed
        if sealed is None:  # not sealed, so a slot was never set: a bug
            raise AttributeError(f"trial {self._id}'s record is incomplete")
        parts = sealed.reopen(self._id)
        self._spec, self._machine = parts.spec, parts.machine
        self._config, self._events = parts.config, parts.events
        self._sealed = None
        return parts

    def _unsealed(self) -> None:
        if self._sealed is not None:
            self._unseal()

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

    def add_waiter(self, waiter: Waiter) -> None:
        self.waiters = [*self.waiters, waiter]

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
        self.waiters = still or _NO_WAITERS

    def fail_waiters(self, error: BaseException) -> None:
        for waiter in self.waiters:
            if not waiter.future.done():
                waiter.future.set_exception(error)
        self.waiters = _NO_WAITERS
