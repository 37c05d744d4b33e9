"""Trainables of ``tests/support/trainables.py`` made for the fake Ray, where every actor is a
thread of this one process: they report their fake actor's ``pid`` instead of the real
one, and crash by ending their fake process instead of this one."""

from __future__ import annotations

from typing import Any

from ..support.fakeray import ProcessDied, current_actor
from ..support.trainables import Climber, Curve, Objective, Recorder, StubbornClimber, Tripwire


def fake_pid() -> int:
    actor = current_actor()
    assert actor is not None, "not on a fake actor's thread"
    return actor.pid


class FakePid:
    """Mixed into a :class:`Recorder`: its ``pid`` is its fake actor's."""

    def step(self) -> dict[str, Any]:
        return {**super().step(), "pid": fake_pid()}  # type: ignore[misc]


class FakeRecorder(FakePid, Recorder):
    pass


class FakeObjective(FakePid, Objective):
    pass


class FakeCurve(FakePid, Curve):
    pass


class FakeClimber(FakePid, Climber):
    pass


class FakeStubbornClimber(FakePid, StubbornClimber):
    pass


class FakeTripwire(Tripwire):
    """A :class:`Tripwire` whose crash ends its fake actor's process."""

    def crash(self) -> None:
        raise ProcessDied("os._exit(1)")
