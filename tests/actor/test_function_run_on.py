"""A function trainable running on past a result while that result travels (the trial
actor in this process, no Ray): it goes on only where no decision can fall, and a stop
that comes instead ends it at its next ``report()`` before anything of that report is
taken. Whole experiments on the fake Ray: ``tests/engine/test_function_run_on.py``."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ray import cloudpickle

from orchestrator import Orchestrator, TrialState, report
from orchestrator.actor import function as fmod
from orchestrator.actor import stepping as actor_steps
from orchestrator.actor.function import on_run_end, wrap_function
from orchestrator.actor.trial_actor import TrialActor
from orchestrator.core.stopping import StopCondition
from orchestrator.core.wire import REPORTED_CHECKPOINT


class HereActor(TrialActor):
    """The trial actor as a plain object: it runs in no Ray worker, so no node id."""

    def _where(self) -> tuple[str, str]:
        return "no-node", "no-host"


def stepping(config: dict[str, Any]) -> None:
    """Reports ``i`` = 1, 2, 3; touches ``past-<i>`` once its report ``i`` returned,
    and reports 2 with a checkpoint directory holding one file."""
    marks = Path(config["marks"])
    on_run_end(lambda outcome: (marks / f"end-{outcome}").touch())
    for i in range(1, 4):
        if i == 2:
            (marks / "ckpt").mkdir()
            (marks / "ckpt" / "state").write_text("2")
            report({"i": i}, checkpoint=str(marks / "ckpt"))
        else:
            report({"i": i})
        (marks / f"past-{i}").touch()


@pytest.fixture
def actor(tmp_path: Path) -> Iterator[Callable[..., HereActor]]:
    """A trial actor hosting ``stepping`` as trial ``t`` (``stop``: its condition)."""
    made: list[HereActor] = []

    def make(stop: dict[str, Any] | None = None) -> HereActor:
        here = HereActor(str(tmp_path / "storage"))
        condition = None if stop is None else StopCondition("t", stop)
        config = {"marks": str(tmp_path / "marks")}
        (tmp_path / "marks").mkdir()
        here.setup("t", 1, cloudpickle.dumps((wrap_function(stepping), config, condition)))
        made.append(here)
        return here

    yield make
    for here in made:
        here.drop("t", 1)


def test_it_runs_on_past_a_result_and_delivers_the_next_only_when_asked(
    actor: Callable[..., HereActor], tmp_path: Path
) -> None:
    """``train_sole_run_on`` returns result 1 and the function goes on into step 2 (no
    call asks for it yet); its report 2 waits for the next call before it takes the
    checkpoint, which that call then delivers, as one step's time."""
    marks = tmp_path / "marks"
    here = actor()
    first = here.train_sole_run_on()
    assert [r["i"] for r in first] == [1]
    assert first[0]["time_this_iter_s"] >= 0
    second = here.train_sole_run_on()  # report 2 was waiting, or is made now
    assert (marks / "past-1").exists()
    assert [r["i"] for r in second] == [2] and REPORTED_CHECKPOINT in second[0]
    saved = here.save("t", 3, 2)  # the save comes next, the function runs on meanwhile
    assert (Path(saved) / "state").read_text() == "2"
    assert [r["i"] for r in here.train("t", 4, True)] == [3]
    assert here._trials["t"].require().iteration == 3


@pytest.mark.parametrize(
    ("case", "ran_on"),
    [
        ("run-on", True),
        ("a decision may fall", False),  # the driver says so: the call's limit
        ("its stop condition met", False),  # checked here, on the result
        ("a step too long", False),  # a stop would wait for the next report that long
    ],
)
def test_a_stop_ends_a_function_that_ran_on_before_anything_of_its_next_report(
    actor: Callable[..., HereActor],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    ran_on: bool,
) -> None:
    """After result 1 the trial is stopped. Where no decision could fall on it, the
    function ran on (``past-1``) and is ended at report 2, whose checkpoint directory
    is left as it was (nothing taken); otherwise it is ended at report 1. Either way
    no result 2 exists and the run ends "stopped". ``stop()`` joins the function's
    thread, so all of this is settled when it returns."""
    marks = tmp_path / "marks"
    if case == "a step too long":
        monkeypatch.setattr(actor_steps, "RUN_ON_MAX_STEP_S", -1.0)
    here = actor(stop={"i": 1} if case == "its stop condition met" else None)
    results = here.train_many("t", 1, 1, None, case != "a decision may fall")
    assert [r["i"] for r in results] == [1]
    assert here.stop("t", 2) is True  # the process is clean: the function returned
    assert (marks / "past-1").exists() is ran_on
    assert not (marks / "past-2").exists()
    assert (marks / "end-stopped").exists()
    if ran_on:
        assert (marks / "ckpt" / "state").read_text() == "2"  # not taken
    assert sorted(os.listdir(marks)) == sorted(
        ["end-stopped", *(["past-1", "ckpt"] if ran_on else [])]
    )


def _note_waits_for_call(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set once a report made while running on starts waiting for its call."""
    waiting = threading.Event()
    wait_for_call = fmod._Run._wait_for_call

    def noted(run: Any) -> None:
        waiting.set()
        wait_for_call(run)

    monkeypatch.setattr(fmod._Run, "_wait_for_call", noted)
    return waiting


def test_a_report_made_while_running_on_takes_nothing_until_its_call(
    actor: Callable[..., HereActor], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The function ran on and reached report 2, which waits for its call: its
    checkpoint directory is still the caller's, untouched, until that call comes."""
    waiting = _note_waits_for_call(monkeypatch)
    here = actor()
    assert [r["i"] for r in here.train_sole_run_on()] == [1]
    assert waiting.wait(60)  # at report 2 (report 1 did not wait: it ran on)
    assert (tmp_path / "marks" / "ckpt" / "state").read_text() == "2"
    second = here.train_sole_run_on()
    assert [r["i"] for r in second] == [2] and REPORTED_CHECKPOINT in second[0]
    assert os.listdir(tmp_path / "marks" / "ckpt") == []  # taken now, an empty one left


def sleeping(config: dict[str, Any]) -> None:
    """Steps of 50 ms (longer than the adaptive slice: one step a call); each result
    says whether the report before it returned by running on (no call had asked yet)."""
    ran_on = False
    for i in range(1, 9):
        time.sleep(0.05)
        (Path(config["marks"]) / f"start-{i}").touch()
        report({"i": i, "ran_on": ran_on})
        ran_on = fmod._current.get().ahead  # type: ignore[union-attr]


@pytest.mark.usefixtures("ray_local")
async def test_on_real_ray_it_runs_on_and_stops_exactly(tmp_path: Path) -> None:
    """The wiring on real Ray (``train_sole_run_on`` or a buffered call with
    ``run_on``): reports return by running on; the stop threshold met at 4 ends the
    function there, before it began step 5."""
    marks = tmp_path / "marks"
    marks.mkdir()
    async with Orchestrator(storage=tmp_path, name="run-on") as orch:
        trial = orch.add_trial(
            sleeping, {"marks": str(marks)}, stop={"i": 4}, resources={"cpu": 0.25}
        )
        await orch.run()
    assert trial.state is TrialState.TERMINATED, trial.error
    assert [r["i"] for r in trial.results] == [1, 2, 3, 4]
    # Each of reports 1-3 ran on unless its step took over RUN_ON_MAX_STEP_S (1 s,
    # 20x its sleep): one of them did, however loaded the machine.
    assert any(r["ran_on"] for r in trial.results[1:])
    assert sorted(p.name for p in marks.iterdir()) == [f"start-{i}" for i in range(1, 5)]


def pausing(config: dict[str, Any]) -> None:
    """Report 1 at once, report 2 after 0.2 s of sleep."""
    report({"i": 1})
    time.sleep(0.2)
    report({"i": 2})


def test_a_step_run_on_into_counts_its_whole_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Step 2 ran (on) before its call came, and the call that delivers it is one
    after which the function must wait (``train_sole``): its ``time_this_iter_s`` is
    the step's, measured in the function's thread, not the call's few microseconds."""
    waiting = _note_waits_for_call(monkeypatch)
    here = HereActor(str(tmp_path / "storage"))
    here.setup("t", 1, cloudpickle.dumps((wrap_function(pausing), {}, None)))
    try:
        assert [r["i"] for r in here.train_sole_run_on()] == [1]
        assert waiting.wait(60)  # step 2 is done: the function waits at report 2
        answer = here.train_sole()
        (second,) = answer if isinstance(answer, list) else [answer]
        assert second["i"] == 2 and second["time_this_iter_s"] >= 0.2
        assert second["time_total_s"] >= 0.2
    finally:
        here.drop("t", 1)


def test_functions_sharing_a_process_never_run_on(tmp_path: Path) -> None:
    """Trials packed into one actor (``trials_per_worker``) never ran their functions
    at the same time, and a function may rely on that (a global seed, the working
    directory): there, a function waits at its report even where it could run on."""
    here = HereActor(str(tmp_path / "storage"))
    for trial in ("a", "b"):
        (tmp_path / trial).mkdir()
        config = {"marks": str(tmp_path / trial)}
        here.setup(trial, 1, cloudpickle.dumps((wrap_function(stepping), config, None)))
    try:
        assert here.train("a", 1, True)[0]["i"] == 1  # type: ignore[index]
        assert [r["i"] for r in here.train_many("b", 1, 1, None, True)] == [1]
        assert here.stop("a", 2) and here.stop("b", 2)
        assert not (tmp_path / "a" / "past-1").exists()
        assert not (tmp_path / "b" / "past-1").exists()
    finally:
        for trial in ("a", "b"):
            here.drop(trial, 1)
