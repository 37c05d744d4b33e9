"""A finished trial's tombstone: what its record keeps once its work is over.

A sweep's finished trials stay in the driver for the whole experiment (issue 36: ten
thousand trials in constant memory). Once a trial has ended (TERMINATED or ERROR, with
nothing in flight and nobody waiting on it) and a committed journal write holds it, its
spec, its state machine's record and policy, its config and its noted events are
pickled into the journal's spill file (a local temporary file, the driver's cache of
what storage holds) and leave memory; the record
(:class:`~orchestrator.engine.trial_runtime.TrialRuntime`) keeps its id, state, iteration,
last result, history view and handle, and a :class:`Sealed` saying where the rest is.

Reading a sealed trial (``Trial.config``, ``trial.checkpoints``, ``inspect``) opens a
transient copy and keeps nothing; the loop touching it (a restore or resume of an ended
trial, a sweep's re-judging, PBT cloning it) rebuilds the live parts for good, exactly
as they were: the pickle is taken and read here, never as the journal's JSON.

Objects whose identity matters or that need not be copied are kept by reference, not
pickled: classes (a trainable defined in a script stays the same class), functions,
modules and exceptions (failures are rare and some do not pickle), and the parts of a
policy that are shared or the experiment's (:func:`_shared_parts`). They are kept once
each, in the :class:`Sealer`'s table, for as long as the experiment.
A trial whose parts do not pickle (an unpicklable config value) is simply not sealed.
"""

from __future__ import annotations

import dataclasses
import io
import pickle
import types
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.core.judge import Judge, Judges, StopJudge
from orchestrator.core.machine import TrialMachine, TrialPolicy
from orchestrator.core.machine.record import TrialRecord

if TYPE_CHECKING:
    from orchestrator.core.machine import TrialState
    from orchestrator.core.spec import TrialSpec

__all__ = ["BlobStore", "Sealed", "Sealer", "Unsealed"]

#: The machine's record, as pickled: every slot but its policy, pickled beside it.
_RECORD_SLOTS = tuple(name for name in TrialRecord.__slots__ if name != "policy")
_NOTHING_SHARED: frozenset[int] = frozenset()
_BY_REFERENCE = (
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
    BaseException,
)


class BlobStore(Protocol):
    """Where sealed parts are put (the journal's spill file)."""

    def put_blob(self, data: bytes) -> Any:
        """Store ``data``; returns where it is."""
        ...

    def get_blob(self, ref: Any) -> bytes:
        """The bytes stored at ``ref``."""
        ...


class Unsealed:
    """A sealed trial's parts, opened: live again, or a transient copy to read."""

    __slots__ = ("spec", "machine", "config", "events")

    def __init__(
        self,
        spec: TrialSpec,
        machine: TrialMachine,
        config: dict[str, Any],
        events: list[dict[str, Any]],
    ) -> None:
        self.spec = spec
        self.machine = machine
        self.config = config
        self.events = events


class Sealed:
    """Where a sealed trial's parts are, and what is read without opening them."""

    __slots__ = ("_sealer", "_ref", "state", "iteration", "pinned")

    def __init__(
        self,
        sealer: Sealer,
        ref: Any,
        state: TrialState,
        iteration: int,
        pinned: frozenset[str] | None,
    ) -> None:
        self._sealer = sealer
        self._ref = ref
        self.state = state
        self.iteration = iteration
        # The checkpoint keys its timeline keeps from deletion (its origin's), or None:
        # the collector asks every trial before deleting a checkpoint.
        self.pinned = pinned

    def open(self) -> Unsealed:
        """The parts, decoded afresh (a new copy at each call)."""
        return self._sealer.load(self._ref)

    def reopen(self, trial_id: str) -> Unsealed:
        """The parts, for the record to hold again: the sealer lists the trial as
        reopened, so the journal seals it again once it is over."""
        self._sealer.reopened.add(trial_id)
        return self.open()


class Sealer:
    """Pickles trials' parts into ``store``, keeping by reference what must not be copied
    (see the module docstring). Used on the loop only; reads may come from any thread."""

    def __init__(self, store: BlobStore) -> None:
        self._store = store
        self._kept: list[Any] = []
        self._kept_at: dict[int, int] = {}
        # While a trial is pickled: the ids of its policy's parts kept by reference.
        self._shared_now: frozenset[int] = _NOTHING_SHARED
        # Trials whose record was brought back since the journal last looked.
        self.reopened: set[str] = set()

    def seal(
        self,
        spec: TrialSpec,
        machine: TrialMachine,
        config: dict[str, Any],
        events: list[dict[str, Any]],
    ) -> Sealed | None:
        """Store the parts; None when they do not pickle (the trial stays live)."""
        record = tuple(getattr(machine, name) for name in _RECORD_SLOTS)
        buffer = io.BytesIO()
        pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
        pickler.persistent_id = self._persistent_id  # type: ignore[method-assign]
        policy = machine.policy
        self._shared_now = _shared_parts(policy)
        try:
            pickler.dump((spec, record, policy, config, events))
        except Exception:
            return None
        finally:
            self._shared_now = _NOTHING_SHARED
        ref = self._store.put_blob(buffer.getvalue())
        return Sealed(self, ref, machine.state, machine.iteration, machine.pinned or None)

    def load(self, ref: Any) -> Unsealed:
        unpickler = pickle.Unpickler(io.BytesIO(self._store.get_blob(ref)))
        unpickler.persistent_load = self._kept.__getitem__  # type: ignore[assignment]
        spec, record, policy, config, events = unpickler.load()
        machine = TrialMachine.__new__(TrialMachine)
        for name, value in zip(_RECORD_SLOTS, record, strict=True):
            setattr(machine, name, value)
        machine.policy = policy
        return Unsealed(spec, machine, config, events)

    def _persistent_id(self, obj: Any) -> int | None:
        if not isinstance(obj, _BY_REFERENCE) and id(obj) not in self._shared_now:
            return None
        at = self._kept_at.get(id(obj))
        if at is None:
            at = self._kept_at[id(obj)] = len(self._kept)
            self._kept.append(obj)  # held: its id is never reused while listed
        return at


def _shared_parts(policy: TrialPolicy) -> frozenset[int]:
    """The ids of what ``policy`` shares with others or must stay the same object: every
    part but its numbers, flags and stop criterion (the trial's own, pickled with its
    spec). Its retention, back-off, required metrics and hook progress are one object
    for many trials; a sweep's judge (its scheduler's) and a stop criterion's callable
    (a stopper may keep state across trials) are the experiment's. Pickled by value,
    the rest of a policy costs nothing to keep (issue 36: a policy was some 240 bytes
    of every finished trial's)."""
    shared: set[int] = set()
    for field in dataclasses.fields(policy):
        value = getattr(policy, field.name)
        if field.name == "judge":
            _judge_parts(value, shared)
        elif value is not None and not isinstance(value, (int, float, str)):
            shared.add(id(value))
    return frozenset(shared)


def _judge_parts(judge: Judge, shared: set[int]) -> None:
    if type(judge) is Judges:
        for part in judge.judges:
            _judge_parts(part, shared)
    elif type(judge) is StopJudge:
        if judge.stop.predicate is not None:
            shared.add(id(judge.stop.predicate))
    else:
        shared.add(id(judge))
