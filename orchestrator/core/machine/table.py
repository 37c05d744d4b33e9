"""The transition table: every legal (state, input), its handler, and the states it may
lead to. Anything not listed is :class:`~orchestrator.errors.InvalidTransition`.

An *input* is an event type, or for a :class:`~orchestrator.core.events.Decided` event
the kind of decision it carries (``Stop``, ``Pause``...): each decision is a column of
its own, so the table says exactly what a stop does in each state, whoever decided it.
The targets are the states a handler may move the trial to (staying put is always
allowed); the machine refuses any other move, so the table is also the state diagram
(:func:`state_diagram`, drawn in ARCHITECTURE.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.core.decisions import (
    DECISION_KINDS,
    Continue,
    Decision,
    Hold,
    Pause,
    RestoreFrom,
    Resume,
    Stop,
)
from orchestrator.core.events import (
    Action,
    ActorReady,
    CheckpointUnavailable,
    ConfigRefused,
    Decided,
    Event,
    Failure,
    GraceExpired,
    HooksCaughtUp,
    Launch,
    RestoreDone,
    SaveDone,
    SaveFailed,
    SaveRequested,
    TrainResult,
)
from orchestrator.core.machine import decided, failures, running, starting
from orchestrator.core.machine.states import TrialState
from orchestrator.core.machine.steps import TrialSteps
from orchestrator.errors import InvalidTransition

__all__ = [
    "ALL_EVENT_TYPES",
    "ALL_INPUTS",
    "TABLE",
    "Input",
    "Move",
    "decision_kind",
    "state_diagram",
]

Handler = Callable[[TrialSteps, Any], list[Action]]
Input = type[Event] | type[Decision]


@dataclass(frozen=True)
class Move:
    """What an input does in a state: its handler, and where it may lead."""

    handler: Handler
    targets: frozenset[TrialState] = frozenset()


def _to(*states: TrialState) -> frozenset[TrialState]:
    return frozenset(states)


PENDING, STARTING, RESTORING = TrialState.PENDING, TrialState.STARTING, TrialState.RESTORING
RUNNING, PAUSED = TrialState.RUNNING, TrialState.PAUSED
TERMINATED, ERROR = TrialState.TERMINATED, TrialState.ERROR
#: Where a pending decision settles once nothing is in flight.
SETTLE = _to(TERMINATED, PAUSED, RESTORING)
#: A failure: restart, settle as decided, or ERROR past the budget.
FAILED = _to(STARTING, TERMINATED, PAUSED, ERROR)

_HOOKS = Move(running.on_hooks_caught_up)
_IGNORED = Move(decided.ignore)
_SAVE = Move(running.on_save_request)
#: A trial without an actor, settled or not yet started.
_IDLE: dict[Input, Move] = {
    HooksCaughtUp: _HOOKS,
    SaveRequested: _IGNORED,  # nothing to save without an actor
    Continue: _IGNORED,
    Hold: _IGNORED,
    Pause: _IGNORED,
    Stop: _IGNORED,
    Resume: _IGNORED,
    RestoreFrom: Move(decided.restore_at_once, _to(STARTING)),
}

#: Every legal (state, input) pair. Anything else is InvalidTransition.
TABLE: Mapping[TrialState, Mapping[Input, Move]] = {
    PENDING: {
        **_IDLE,
        Launch: Move(starting.on_launch, _to(STARTING)),
        Stop: Move(decided.stop_now, _to(TERMINATED)),
        Pause: Move(decided.pause_now, _to(PAUSED)),
    },
    STARTING: {
        ActorReady: Move(starting.on_actor_ready, _to(RESTORING, RUNNING)),
        Failure: Move(failures.on_failure, _to(STARTING, ERROR)),
        GraceExpired: Move(failures.on_grace_expired),
        HooksCaughtUp: _HOOKS,
        SaveRequested: _SAVE,
        Continue: _IGNORED,
        Hold: _IGNORED,
        Stop: Move(decided.stop_now, _to(TERMINATED)),
        Pause: Move(decided.pause_now, _to(PAUSED)),
        Resume: Move(decided.keep_running),
        RestoreFrom: Move(decided.restore_on_ready),
    },
    RESTORING: {
        RestoreDone: Move(starting.on_restore_done, SETTLE | {RUNNING}),
        CheckpointUnavailable: Move(starting.on_checkpoint_unavailable, SETTLE | {RUNNING, ERROR}),
        ConfigRefused: Move(starting.on_config_refused, _to(STARTING, TERMINATED, PAUSED)),
        Failure: Move(failures.on_failure, FAILED),
        GraceExpired: Move(failures.on_grace_expired, _to(TERMINATED, PAUSED)),
        HooksCaughtUp: _HOOKS,
        SaveRequested: _SAVE,
        Continue: _IGNORED,
        Hold: _IGNORED,
        Stop: Move(decided.stop_when_idle),
        Pause: Move(decided.pause_when_idle),
        Resume: Move(decided.keep_running),
        RestoreFrom: Move(decided.restore_next),
    },
    RUNNING: {
        TrainResult: Move(running.on_train_result, SETTLE | {ERROR}),
        SaveDone: Move(running.on_save_done, SETTLE),
        SaveFailed: Move(running.on_save_failed, SETTLE),
        Failure: Move(failures.on_failure, FAILED),
        GraceExpired: Move(failures.on_grace_expired, _to(TERMINATED, PAUSED)),
        HooksCaughtUp: _HOOKS,
        SaveRequested: _SAVE,
        Continue: Move(decided.go_on),
        Hold: Move(decided.hold),
        Stop: Move(decided.stop_when_idle, _to(TERMINATED)),
        Pause: Move(decided.pause_when_idle, _to(PAUSED, TERMINATED)),  # a stop stands
        Resume: Move(decided.keep_running),
        RestoreFrom: Move(decided.restore_when_idle, _to(RESTORING)),
    },
    PAUSED: {
        **_IDLE,
        Stop: Move(decided.stop_now, _to(TERMINATED)),
        Resume: Move(decided.resume, _to(STARTING)),
    },
    TERMINATED: _IDLE,
    ERROR: {**_IDLE, Resume: Move(decided.resume, _to(STARTING))},
}

#: Every event the machine takes (a ``Decided`` event in the column of its decision).
ALL_EVENT_TYPES: tuple[type[Event], ...] = (
    Launch,
    ActorReady,
    TrainResult,
    SaveDone,
    SaveFailed,
    RestoreDone,
    CheckpointUnavailable,
    ConfigRefused,
    Failure,
    GraceExpired,
    HooksCaughtUp,
    SaveRequested,
    Decided,
)
#: The table's columns, in the order the diagram lists them.
ALL_INPUTS: tuple[Input, ...] = (
    *(t for t in ALL_EVENT_TYPES if t is not Decided),
    *DECISION_KINDS,
)

_KINDS: dict[type[Decision], type[Decision]] = {kind: kind for kind in DECISION_KINDS}


def decision_kind(decision: Decision) -> type[Decision]:
    """The table's column for ``decision``: its own class, or the kind it derives from
    (a scheduler's ``Exploit`` is a ``RestoreFrom``)."""
    cls = type(decision)
    kind = _KINDS.get(cls)
    if kind is None:
        kind = next((k for k in cls.__mro__ if k in DECISION_KINDS), None)  # type: ignore[misc]
        if kind is None:
            raise InvalidTransition(f"{cls.__name__} is no decision the machine knows")
        _KINDS[cls] = kind
    return kind


def state_diagram() -> str:
    """The table as a Mermaid state diagram: one arrow per (state, target), labelled
    with the inputs that may take it (inputs that move nothing are left out)."""
    lines = ["stateDiagram-v2", f"    [*] --> {PENDING.value}"]
    for source in TrialState:
        row = TABLE[source]
        for target in TrialState:
            names = [i.__name__ for i in ALL_INPUTS if i in row and target in row[i].targets]
            if names:
                lines.append(f"    {source.value} --> {target.value}: {', '.join(names)}")
    lines += [f"    {s.value} --> [*]" for s in TrialState if s.is_terminal]
    return "\n".join(lines)
