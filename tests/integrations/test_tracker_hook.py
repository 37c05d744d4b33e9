"""The tracker hook's worker, without an experiment: a tracker stuck in a call is
abandoned at close, and once it returns it touches nothing of the next session's
(which has a worker, and runs, of its own). The backend here is a recorder whose first
``open`` blocks until released: a stand-in for a tracker that hangs."""

from __future__ import annotations

import logging
import threading
import types
from collections.abc import Mapping
from typing import Any

import pytest

from orchestrator.integrations.backend import RunHandle, TrialRun
from orchestrator.integrations.tracker import TrackerHook


class Recorder:
    label = "recorder"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.opens = 0
        self.logged: list[tuple[str, int, str]] = []  # (trial, step, thread)

    def open(self, trial: TrialRun) -> RunHandle:
        self.opens += 1
        if self.opens == 1:
            self.release.wait(60)
        return RunHandle(trial.trial_id)

    def log(self, handle: RunHandle, rows: list[tuple[int, dict[str, float]]]) -> None:
        for step, _ in rows:
            self.logged.append((handle.run, step, threading.current_thread().name))

    def set_config(self, handle: RunHandle, config: Mapping[str, Any]) -> None:
        return None

    def finish(self, handle: RunHandle, status: str, artifact_dir: str | None) -> None:
        return None

    def close(self) -> None:
        return None


def trial(name: str) -> Any:
    return types.SimpleNamespace(
        id=name, config={"x": 1}, results=[], latest_checkpoint=None, state=None
    )


def test_an_abandoned_worker_never_touches_the_next_sessions_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator.integrations")
    backend = Recorder()
    hook = TrackerHook(backend, close_grace=0.2)
    stuck = trial("a")
    hook.on_trial_start(stuck)
    for step in (1, 2):
        hook.on_trial_result(stuck, {"training_iteration": step, "v": step})
    hook.close()  # the first open never returns: abandoned
    assert any("made no progress" in r.getMessage() for r in caplog.records)

    later = trial("b")
    hook.on_trial_start(later)  # a later session: a new worker
    hook.on_trial_result(later, {"training_iteration": 1, "v": 1})
    backend.release.set()  # the old worker's call returns now
    hook.close()
    for thread in threading.enumerate():  # both workers end: the old one as released
        if thread.name == "tracker:recorder":
            thread.join(30)
            assert not thread.is_alive()
    assert [(t, s) for t, s, _ in backend.logged] == [("b", 1)]
