"""The machine: an input looked up in the table, its handler run, its moves checked."""

from __future__ import annotations

from orchestrator.core.decisions import Decision
from orchestrator.core.events import Action, ActorEvent, Decided, Event
from orchestrator.core.machine.states import TrialState
from orchestrator.core.machine.steps import TrialSteps
from orchestrator.core.machine.table import TABLE, Input, Move, decision_kind
from orchestrator.errors import InvalidTransition

__all__ = ["TrialMachine"]

_NOWHERE: frozenset[TrialState] = frozenset()
#: The table's rows by their state's identity: an enum member hashes in Python, an int
#: in C, and this lookup is on every event's path.
_ROWS = {id(state): row for state, row in TABLE.items()}


class TrialMachine(TrialSteps):
    """One trial's state, and the only code that changes it.

    ``handle(event)`` returns the actions to carry out, in order. An event the current
    state does not accept, or a handler's move the table does not list, raises
    :class:`InvalidTransition` and changes nothing.
    """

    __slots__ = ()

    def handle(self, event: Event) -> list[Action]:
        if isinstance(event, ActorEvent) and (
            event.generation != self.generation or not self._state.has_actor
        ):
            return []  # stale: from an actor that has been replaced or released
        if type(event) is Decided:
            decision = event.decision
            if decision.trial_id != self.trial_id:
                raise InvalidTransition(
                    f"trial {self.trial_id}: a decision about trial {decision.trial_id} "
                    "was sent to it"
                )
            key: Input = decision_kind(decision)
            given: Event | Decision = decision
        else:
            key, given = type(event), event
        move = self._entry(key)
        snapshot = self._snapshot()
        try:
            actions = self._run(move, given)
            follow_up = self._then
            if follow_up is not None:
                # What the judge decided on a result: carried out as the Decided event
                # it is, in the state the result left the trial in.
                self._then = None
                actions += self._run(self._entry(decision_kind(follow_up)), follow_up)
        except InvalidTransition:
            self._rollback(snapshot)
            raise
        return actions

    def _entry(self, key: Input) -> Move:
        move = _ROWS[id(self._state)].get(key)
        if move is None:
            what = "decision" if issubclass(key, Decision) else "event"
            raise InvalidTransition(
                f"trial {self.trial_id}: {what} {key.__name__} is not accepted in state "
                f"{self.state.value}"
            )
        return move

    def _run(self, move: Move, given: Event | Decision) -> list[Action]:
        self._may_move_to = move.targets
        try:
            return move.handler(self, given)
        finally:
            self._may_move_to = _NOWHERE
