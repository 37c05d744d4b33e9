"""The machine's one table, checked: every (state, input) pair either moves the trial to
a target the table lists or raises ``InvalidTransition`` and changes nothing; random
input sequences never reach a move the table does not list; the state diagram in
ARCHITECTURE.md is the table's. No Ray, no asyncio."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.core.checkpoints import RetentionPolicy
from orchestrator.core.decisions import (
    Continue,
    Decision,
    Hold,
    Pause,
    RestoreFrom,
    Resume,
    Stop,
)
from orchestrator.core.events import (
    ActorEvent,
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
from orchestrator.core.machine import (
    ALL_INPUTS,
    TABLE,
    Input,
    Move,
    TrialMachine,
    TrialState,
    UndeclaredMove,
    state_diagram,
)
from orchestrator.core.machine.record import TrialRecord
from orchestrator.errors import InvalidTransition

from ..support import REPO_ROOT
from ..support.machines import ckpt, machine, result

ROOT = REPO_ROOT


def sample(key: Input, m: TrialMachine) -> Event:
    """An event of input ``key`` (an event type, or a decision's kind) for ``m`` now."""
    decisions: dict[Input, Decision] = {
        Continue: Continue("t"),
        Stop: Stop("t"),
        Pause: Pause("t"),
        Hold: Hold("t"),
        Resume: Resume("t"),
        RestoreFrom: RestoreFrom("t", ckpt(1)),
    }
    if key in decisions:
        return Decided(decisions[key])
    gen = m.generation
    events: dict[Input, Event] = {
        Launch: Launch(),
        ActorReady: ActorReady(gen),
        TrainResult: TrainResult(gen, ({"x": 1},)),
        SaveDone: SaveDone(gen, ckpt(m.iteration)),
        SaveFailed: SaveFailed(gen, m.iteration, OSError("storage down")),
        CheckpointUnavailable: CheckpointUnavailable(gen, ckpt(1), OSError("node gone")),
        RestoreDone: RestoreDone(gen, m.restore_target or ckpt(m.iteration)),
        Failure: Failure(gen, RuntimeError("x")),
        ConfigRefused: ConfigRefused(gen, ckpt(1)),
        HooksCaughtUp: HooksCaughtUp(m.results_reported),
        GraceExpired: GraceExpired(gen, m.grace_token),
        SaveRequested: SaveRequested(),
    }
    return events[key]


def drive_to(state: TrialState) -> TrialMachine:
    m = machine(checkpoint_every=1, max_failures=0)
    if state is TrialState.PENDING:
        return m
    m.handle(Launch())
    if state is TrialState.STARTING:
        return m
    if state is TrialState.RESTORING:
        m.handle(ActorReady(m.generation))
        m.handle(Decided(RestoreFrom("t", ckpt(1))))
        result(m)  # the save it asks for comes first (checkpoint_every=1)
        m.handle(SaveDone(m.generation, ckpt(1)))
        return m
    m.handle(ActorReady(m.generation))
    if state is TrialState.RUNNING:
        return m
    if state is TrialState.ERROR:
        m.handle(Failure(m.generation, RuntimeError("x")))
        return m
    m.handle(Decided(Pause("t") if state is TrialState.PAUSED else Stop("t")))
    result(m)
    m.handle(SaveDone(m.generation, ckpt(1)))
    return m


def record_of(m: TrialMachine) -> dict[str, Any]:
    """Everything the machine holds (its containers are replaced, never changed in
    place, except ``dropped``, which is copied here)."""
    fields = {name: getattr(m, name) for name in TrialRecord.__slots__}
    return {**fields, "dropped": dict(m.dropped)}


def name_of(key: Input) -> str:
    return key.__name__


@pytest.mark.parametrize("state", list(TrialState))
def test_drive_to_reaches_every_state(state: TrialState) -> None:
    assert drive_to(state).state is state


@pytest.mark.parametrize("key", ALL_INPUTS, ids=name_of)
@pytest.mark.parametrize("state", list(TrialState))
def test_every_state_input_pair_moves_to_a_listed_target_or_raises(
    state: TrialState, key: Input
) -> None:
    m = drive_to(state)
    event = sample(key, m)
    before = record_of(m)
    stale = isinstance(event, ActorEvent) and not state.has_actor
    if key in TABLE[state] or stale:
        try:
            m.handle(event)
        except UndeclaredMove:
            raise  # the table is missing a target
        except InvalidTransition:  # listed, but not in this situation
            assert record_of(m) == before
        else:
            if stale:
                assert record_of(m) == before
            else:
                assert m.state is state or m.state in TABLE[state][key].targets
    else:
        with pytest.raises(InvalidTransition, match="is not accepted in state"):
            m.handle(event)
        assert record_of(m) == before


class DecidesOnResults:
    """A judge that holds at 3, rolls back to checkpoint 2 at 5, pauses at 7 and stops
    at 9 (and says so as its decision points), so random sequences see every kind of
    decision arrive with a result."""

    PLAN: dict[int, Decision] = {
        3: Hold("t"),
        5: RestoreFrom("t", ckpt(2)),
        7: Pause("t"),
        9: Stop("t"),
    }

    def judge(self, result: dict[str, Any]) -> Decision | None:
        return self.PLAN.get(result["training_iteration"])

    def next_decision_at(self, iteration: int) -> int | None:
        return next((p for p in sorted(self.PLAN) if p > iteration), None)


class NoProgress:
    """Result hooks that never report progress by themselves (HooksCaughtUp does)."""

    def seen(self, trial_id: str) -> int | None:
        return 0


def _inputs() -> st.SearchStrategy[tuple[str, int]]:
    return st.tuples(st.sampled_from([t.__name__ for t in ALL_INPUTS]), st.integers(-1, 1))


@settings(max_examples=int(os.environ.get("TRIALFLOW_FUZZ_EXAMPLES", "300")), deadline=None)
@given(st.lists(_inputs(), max_size=60))
def test_random_input_sequences_keep_invariants(seq: list[tuple[str, int]]) -> None:
    """Whatever arrives, in any order: each input moves to a target its table entry
    lists or raises (never a move the table does not list), and the machine's
    invariants hold after every step."""
    m = machine(
        checkpoint_every=2,
        max_failures=2,
        retention=RetentionPolicy(keep=2),
        max_pending_saves=1,
        judge=DecidesOnResults(),
        steps_per_call=3,
        hook_progress=NoProgress(),
    )
    by_name = {t.__name__: t for t in ALL_INPUTS}
    # A result may carry the judge's decision, carried out in RUNNING right after it.
    running_row = TABLE[TrialState.RUNNING]
    after_result = frozenset().union(*(move.targets for move in running_row.values()))
    for name, gen_offset in seq:
        key = by_name[name]
        event = sample(key, m)
        if isinstance(event, ActorEvent):
            event = type(event)(**{**event.__dict__, "generation": m.generation + gen_offset})
        state, move = m.state, TABLE[m.state].get(key)
        try:
            m.handle(event)
        except UndeclaredMove:
            raise
        except InvalidTransition:
            assert m.state is state
        else:
            if m.state is not state:
                assert move is not None
                allowed = move.targets | (after_result if key is TrainResult else frozenset())
                assert m.state in allowed, (state, name, m.state)
        assert 0 <= m.saves_in_flight <= m.policy.max_pending_saves + 1
        assert not (m.state.is_settled and (m.train_in_flight or m.saves_in_flight))
        if m.state is TrialState.RUNNING:
            assert m.train_in_flight or m.saves_in_flight or m.intent is not None
            if m.intent is None and not m.train_in_flight:  # saves, judge or hooks hold it
                assert (
                    m.held
                    or m.saves_in_flight > m.policy.max_pending_saves
                    or (m.waiting_for_hooks and m.results_hooked < m.reported_at_call)
                )
        assert [c.iteration for c in m.checkpoints] == sorted(c.iteration for c in m.checkpoints)
        if m.state is TrialState.RUNNING:  # nothing newer than the run's own point
            assert all(c.iteration <= m.iteration for c in m.checkpoints)
        assert len(m.checkpoints) <= 3  # keep=2, plus pinned ones at most


def test_a_move_the_table_does_not_list_raises_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The handler ran its course (a checkpoint persisted, retention dropped older ones)
    before it tried to settle the trial where its entry does not allow: all undone."""
    m = machine(checkpoint_every=1, retention=RetentionPolicy(keep=1))
    m.handle(Launch())
    m.handle(ActorReady(m.generation))
    result(m)
    m.handle(SaveDone(m.generation, ckpt(1)))
    m.handle(Decided(Stop("t")))  # waits for the step in flight
    result(m)  # saves iteration 2, then settles once it is persisted
    before = record_of(m)
    handler = TABLE[TrialState.RUNNING][SaveDone].handler
    monkeypatch.setitem(TABLE[TrialState.RUNNING], SaveDone, Move(handler))  # type: ignore[index]
    with pytest.raises(UndeclaredMove, match="may not move from RUNNING to TERMINATED"):
        m.handle(SaveDone(m.generation, ckpt(2)))
    assert record_of(m) == before
    assert [c.iteration for c in m.checkpoints] == [1] and ckpt(1).key not in m.dropped
    monkeypatch.undo()
    m.handle(SaveDone(m.generation, ckpt(2)))
    assert m.state is TrialState.TERMINATED and [c.iteration for c in m.checkpoints] == [2]


def test_the_state_can_only_change_through_a_listed_move() -> None:
    m = machine()
    with pytest.raises(AttributeError):
        m.state = TrialState.RUNNING  # type: ignore[misc]
    with pytest.raises(UndeclaredMove):  # not while an input is handled: no move allowed
        m._move(TrialState.RUNNING)
    assert m.state is TrialState.PENDING


def test_a_decision_about_another_trial_is_refused() -> None:
    m = drive_to(TrialState.RUNNING)
    before = record_of(m)
    with pytest.raises(InvalidTransition, match="a decision about trial u"):
        m.handle(Decided(Stop("u")))
    assert record_of(m) == before


def test_architecture_md_draws_the_table() -> None:
    """ARCHITECTURE.md shows the state diagram as the table has it (regenerate it with
    ``python -c "from orchestrator.core.machine import state_diagram; print(state_diagram())"``)."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    assert f"```mermaid\n{state_diagram()}\n```" in text
