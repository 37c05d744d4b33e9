"""The trial lifecycle: a sans-IO state machine, and the only code that changes a trial.

Everything that decides what happens to a trial lives in this package: the one table of
legal transitions and their targets (``table.py``), the handlers that turn each input
into the actions the loop must carry out (``starting.py``, ``running.py``,
``failures.py``, ``decided.py``), the small moves they are made of (``steps.py``), the
trial's record and the one method that changes its state (``record.py``), and its
states and policy (``states.py``). The events and actions themselves are small
dataclasses in :mod:`orchestrator.core.events`, the decisions in
:mod:`orchestrator.core.decisions`. It imports neither Ray nor asyncio, so it is tested
exhaustively on its own; the loop (:mod:`orchestrator.engine.loop`) feeds it events and
executes the actions it returns.

Theory of operation
-------------------
A trial has one :class:`TrialState`. Work on its actor (start, train, save, restore) is
asked for by actions and comes back as events. Every actor is given a *generation*
number; an event from an older generation (the actor was replaced after a failure, or
killed on pause) is stale and silently dropped, which is what makes late results from
dead actors harmless.

``TrialMachine.handle(event)`` looks the (state, input) pair up in the table (an input
is an event type, or the kind of decision a ``Decided`` event carries), runs its handler,
and checks every move of the state against the entry's targets: a pair the table does
not list, or a move it does not allow, raises ``InvalidTransition`` and leaves the
machine exactly as it was.

While RUNNING, exactly one train step is in flight unless an *intent* is pending: a
decision (``Stop``, ``Pause`` or ``RestoreFrom``) waits for what is in flight. Decisions
come from anyone, in one vocabulary: the user's ``trial.stop()``, a sweep's scheduler,
and the trial's judge (:mod:`orchestrator.core.judge`: the stop criterion, a scheduler),
which sees every result before the next step is asked for and caps how many steps a
buffered call may run, so decisions are exact. What the judge decides on a result is
carried out right after it, as the ``Decided`` event it is; it may also ``Hold`` the
trial (keep its actor, train no further) until a later decision. A save does not block
training: it is asked for together with the next train step. But a trial trains ahead
of at most ``max_pending_saves`` unpersisted checkpoints: past that, the next step
waits for a save to be persisted, so scratch space and upload queues stay bounded when
storage is slower than training.

Failures (the trainable raised, its actor or node died) all take one path: the actor is
dropped and, within ``max_failures``, a new one is started and restored from the
newest persisted checkpoint (or started fresh when there is none); past the budget the
trial goes to ERROR, keeping the cause. A failure after a stop or pause was decided
settles the trial as decided.
"""

from __future__ import annotations

from orchestrator.core.machine.machine import TrialMachine
from orchestrator.core.machine.record import UndeclaredMove
from orchestrator.core.machine.states import HookProgressView, Intent, TrialPolicy, TrialState
from orchestrator.core.machine.table import (
    ALL_EVENT_TYPES,
    ALL_INPUTS,
    TABLE,
    Input,
    Move,
    decision_kind,
    state_diagram,
)

__all__ = [
    "ALL_EVENT_TYPES",
    "ALL_INPUTS",
    "TABLE",
    "HookProgressView",
    "Input",
    "Intent",
    "Move",
    "TrialMachine",
    "TrialPolicy",
    "TrialState",
    "UndeclaredMove",
    "decision_kind",
    "state_diagram",
]
