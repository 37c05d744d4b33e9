"""A stop or pause of a trial whose call never returns, driven by hand: no Ray.

The machine arms a grace period when a stop or pause has to wait for a call in flight
(``ArmGrace``); if the call has not returned when it runs out (``GraceExpired``), the
actor is killed (``StopActor(stuck=True)``) and the trial settles as asked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator import ConfigError, Orchestrator
from orchestrator.core.decisions import Pause, Resume, Stop
from orchestrator.core.events import (
    ArmGrace,
    Decided,
    GraceExpired,
    SaveDone,
    StopActor,
    TrainResult,
)
from orchestrator.core.machine import TrialMachine, TrialState
from orchestrator.core.spec import policy_for

from ..support.machines import ckpt, kinds, running
from ..support.trainables import Counter


def step(m: TrialMachine, took: float = 0.01) -> list[Any]:
    return m.handle(TrainResult(m.generation, ({"time_this_iter_s": took},)))


def armed(actions: list[Any]) -> ArmGrace:
    (grace,) = [a for a in actions if isinstance(a, ArmGrace)]
    return grace


def test_a_stop_waits_its_grace_period_for_a_step_then_kills_the_actor() -> None:
    m = running(stop_grace_s=30.0, checkpoint_every=2)
    step(m)
    step(m)
    m.handle(SaveDone(m.generation, ckpt(2)))
    step(m)  # the call for step 4 never returns
    grace = armed(m.handle(Decided(Stop("t"))))
    assert grace == ArmGrace(m.generation, m.grace_token, 30.0)
    assert m.state is TrialState.RUNNING  # waits for the step meanwhile
    assert m.handle(Decided(Stop("t"))) == []  # asked again: the same grace period
    actions = m.handle(GraceExpired(grace.generation, grace.token))
    assert kinds(actions) == ["StopActor", "Notify"]
    assert actions[0] == StopActor(grace.generation, graceful=False, stuck=True)
    assert m.state is TrialState.TERMINATED and m.iteration == 3
    assert not m.train_in_flight and not m.saves_in_flight


def test_a_pause_of_a_stuck_trial_settles_paused_at_its_newest_checkpoint() -> None:
    m = running(stop_grace_s=5.0, checkpoint_every=2)
    step(m)
    step(m)
    m.handle(SaveDone(m.generation, ckpt(2)))
    step(m)
    grace = armed(m.handle(Decided(Pause("t"))))
    actions = m.handle(GraceExpired(grace.generation, grace.token))
    assert kinds(actions) == ["StopActor"] and actions[0].stuck
    assert m.state is TrialState.PAUSED and m.latest_checkpoint == ckpt(2)
    assert kinds(m.handle(Decided(Resume("t")))) == ["StartActor"]
    assert m.restore_target == ckpt(2)


def test_a_step_that_returns_within_the_grace_period_settles_as_usual() -> None:
    m = running(checkpoint_every=1)
    grace = armed(m.handle(Decided(Stop("t"))))
    assert kinds(step(m)) == ["Report", "Save"]
    m.handle(SaveDone(m.generation, ckpt(1)))
    assert m.state is TrialState.TERMINATED
    assert m.handle(GraceExpired(grace.generation, grace.token)) == []  # too late: stale


def test_the_grace_period_is_at_least_twice_the_longest_step() -> None:
    m = running(stop_grace_s=30.0)
    step(m, took=100.0)
    step(m, took=20.0)
    assert armed(m.handle(Decided(Stop("t")))).seconds == 200.0


def test_a_resume_cancelling_a_pause_disarms_its_grace_period() -> None:
    m = running(stop_grace_s=1.0)
    first = armed(m.handle(Decided(Pause("t"))))
    m.handle(Decided(Resume("t")))  # cancels the pause; the step is still in flight
    second = armed(m.handle(Decided(Pause("t"))))
    assert second.token != first.token
    assert m.handle(GraceExpired(first.generation, first.token)) == []
    assert m.state is TrialState.RUNNING
    assert kinds(m.handle(GraceExpired(second.generation, second.token)))[0] == "StopActor"


def test_saves_left_in_flight_get_their_own_limit_once() -> None:
    """The step returned but the final checkpoint is still uploading when the grace
    period ends: an upload has its own retry limit (save_retry_for), so it gets that
    long once more before the actor goes."""
    m = running(stop_grace_s=1.0, save_grace_s=300.0, checkpoint_every=1)
    grace = armed(m.handle(Decided(Stop("t"))))
    assert kinds(step(m)) == ["Report", "Save"]
    again = armed(m.handle(GraceExpired(grace.generation, grace.token)))
    assert again.seconds == 300.0 and m.state is TrialState.RUNNING
    actions = m.handle(GraceExpired(again.generation, again.token))
    assert actions[0] == StopActor(again.generation, graceful=False, stuck=True)
    assert m.state is TrialState.TERMINATED and m.checkpoints == []


def test_a_bad_stop_grace_s_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="stop_grace_s must be a number of seconds >= 0"):
        Orchestrator(storage=tmp_path, stop_grace_s=-1)
    orch = Orchestrator(storage=tmp_path, stop_grace_s=2.5)
    spec = orch.trial_spec(Counter)
    assert policy_for(spec, orch.settings).stop_grace_s == 2.5
