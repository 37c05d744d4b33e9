"""The loop end to end on the fake Ray: what a hung call, a lost actor and a user's
hooks do to a trial, through the public requests and Ray-side events only.

A stuck step is a call the fake holds (its thread waits at a gate, as a hung worker
would, until the actor is killed); a crash is the fake actor's death; a completion that
arrives late is an answer the fake holds. The hook tests were real-Ray tests
(``tests/test_hook_requests.py``) and the stuck one ``tests/test_stuck.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Checkpoint, Trial, TrialState

from ..support.fake_engine import MakeOrchestrator, iterations, until
from ..support.fakeray import TRAIN, FakeRay
from ..support.observe import committed
from ..support.trainables import Counter, assert_failure_free_history

CPU = {"cpu": 0.25}


async def test_stop_and_pause_end_a_stuck_step_and_leave_no_actor(
    tmp_path: Path,
    fake_ray: FakeRay,
    orchestrator: MakeOrchestrator,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each trial's fourth step never returns. ``stop()`` and ``pause()`` settle the
    trial once the grace period is over, killing its actor; the trial left stuck is
    killed at exit."""
    caplog.set_level(logging.WARNING, logger="orchestrator.engine.loop")
    async with orchestrator(
        storage=tmp_path, name="stuck", stop_grace_s=0.5, result_buffer=1
    ) as orch:
        stopped, paused = (
            orch.add_trial(Counter, checkpoint_every=2, resources=CPU) for _ in range(2)
        )
        left = orch.add_trial(Counter, resources=CPU)  # stuck at exit
        trials = (stopped, paused, left)
        gates = [fake_ray.hold(TRAIN, trial=t.id, after=3) for t in trials]
        runner = asyncio.create_task(orch.run())
        for gate in gates:
            await gate.reached()
        await until(lambda: all(t.iteration == 3 for t in trials))
        await until(lambda: all(t.checkpoints for t in trials[:2]))
        actors = {t.id: fake_ray.actor_of(t.actor) for t in trials}
        await asyncio.wait_for(asyncio.gather(stopped.stop(), paused.pause()), 30)
        assert stopped.state is TrialState.TERMINATED and iterations(stopped) == [1, 2, 3]
        assert paused.state is TrialState.PAUSED and paused.actor is None
        assert paused.latest_checkpoint is not None and paused.latest_checkpoint.iteration == 2
        assert actors[stopped.id].dead and actors[paused.id].dead
        assert f"trial {stopped.id}: its actor did not answer within its grace" in caplog.text
        assert left.state is TrialState.RUNNING and not actors[left.id].dead
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
    assert actors[left.id].dead  # killed at exit
    assert not any(g.is_open for g in gates)  # nothing released them but the kills


async def test_a_crash_restores_the_newest_persisted_checkpoint_not_a_later_save(
    tmp_path: Path, fake_ray: FakeRay, orchestrator: MakeOrchestrator
) -> None:
    """The save of iteration 6 is written, but its answer is late: when the actor dies
    the trial restores 3, the newest checkpoint it knew persisted. The late answer,
    for an actor given up, is garbage-collected, and the history is a failure-free
    run's."""
    restored: list[int] = []

    class Restores:
        def on_trial_restore(self, trial: Trial, checkpoint: Checkpoint) -> None:
            restored.append(checkpoint.iteration)

    async with orchestrator(
        storage=tmp_path, name="late", max_failures=1, hooks=[Restores()]
    ) as orch:
        trial = orch.add_trial(
            Counter,
            {"delay": 0.01},
            stop={"training_iteration": 12},
            checkpoint_every=3,
            resources=CPU,
        )
        late = fake_ray.hold("save_and_commit", trial=trial.id, answer=True, after=1)
        runner = asyncio.create_task(orch.run())
        await late.reached()
        assert [c.iteration for c in trial.checkpoints] == [3]
        killed = fake_ray.actor_of(trial.actor)
        fake_ray.kill(trial.actor)
        await until(lambda: restored == [3] and trial.state is TrialState.RUNNING)
        late.open()  # the answer lands now, for the actor given up
        await runner
        await asyncio.sleep(0.2)  # the collector deletes in the background
    assert killed.dead and restored == [3]
    assert trial.state is TrialState.TERMINATED
    assert_failure_free_history(trial, 12)
    assert [c.iteration for c in trial.checkpoints] == [3, 6, 9, 12]
    names = committed(tmp_path / "late", trial)
    # The late save took key checkpoint_000006; the new run's save of 6 another one.
    assert "checkpoint_000006" not in names and "checkpoint_000006.1" in names


async def test_a_hook_restore_at_a_result_takes_effect(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    """The public-API check: 4 trials, checkpoint_every=5, a hook restores one trial to
    its first checkpoint on result 12. Trivial steps run ahead of the hooks."""
    seen: dict[str, list[int]] = {}
    restored: list[tuple[str, int]] = []
    target: list[str] = []

    class RollBack:
        async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
            seen.setdefault(trial.id, []).append(result["training_iteration"])
            if trial.id == target[0] and result["training_iteration"] == 12 and not restored:
                await trial.restore(trial.checkpoints[0])

        def on_trial_restore(self, trial: Trial, checkpoint: Checkpoint) -> None:
            restored.append((trial.id, checkpoint.iteration))

    async with orchestrator(storage=tmp_path, name="hookreq", hooks=[RollBack()]) as orch:
        trials = [
            orch.add_trial(
                Counter,
                {"i": i},
                stop={"training_iteration": 20},
                checkpoint_every=5,
                resources=CPU,
            )
            for i in range(4)
        ]
        target.append(trials[0].id)
        returned = await orch.run()
        assert all(t.state is TrialState.TERMINATED for t in returned)
    victim = trials[0]
    assert restored == [(victim.id, 5)]
    assert [r["training_iteration"] for r in victim.results] == list(range(1, 21))
    assert all(r["count"] == r["training_iteration"] for r in victim.results)
    # Every result in order: 1..12, those of the abandoned run reported before the
    # restore landed (at most two calls of 5 past 12), then 6..20 of the new run.
    got = seen[victim.id]
    abandoned = len(got) - 12 - 15
    assert 0 <= abandoned <= 8, got
    assert got == [*range(1, 13 + abandoned), *range(6, 21)]
    for t in trials[1:]:
        assert seen[t.id] == list(range(1, 21))


async def test_a_hook_brings_back_a_terminated_trial_and_run_waits_for_it(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    """README: restore brings back a TERMINATED trial; from a hook, run() returns only
    once it has run again and settled."""
    complete: list[int] = []

    class Again:
        async def on_trial_complete(self, trial: Trial) -> None:
            complete.append(trial.iteration)
            if len(complete) == 1:
                assert trial.state is TrialState.TERMINATED
                await trial.restore(trial.checkpoints[0])

    async with orchestrator(storage=tmp_path, name="again", hooks=[Again()]) as orch:
        trial = orch.add_trial(
            Counter, stop={"training_iteration": 20}, checkpoint_every=5, resources=CPU
        )
        await orch.run()
        assert trial.state is TrialState.TERMINATED
    assert complete == [20, 20]
    assert [r["training_iteration"] for r in trial.results] == list(range(1, 21))
    assert trial.discarded_results == 15


async def test_a_blocked_result_hook_holds_its_trial_within_two_calls(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    """Defaults (adaptive buffering, trivial steps): while a user's result hook is stuck
    on result 1, the trial trains at most two calls (of at most ADAPTIVE_MAX_STEPS
    steps) further, instead of running away from it."""
    from orchestrator.core.spec import ADAPTIVE_MAX_STEPS

    bound = 2 * ADAPTIVE_MAX_STEPS
    observed: list[int] = []

    class Stuck:
        async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
            if result["training_iteration"] == 1:
                loop = asyncio.get_running_loop()
                # Unpaced, trivial steps on the fake pass the bound in milliseconds.
                give_up = loop.time() + 1.0  # the trial passing the bound ends it sooner
                while trial.iteration <= bound and loop.time() < give_up:
                    await asyncio.sleep(0.05)
                observed.append(trial.iteration)
                await trial.stop()

    async with orchestrator(storage=tmp_path, name="paced", hooks=[Stuck()]) as orch:
        trial = orch.add_trial(Counter, stop={"training_iteration": 50 * bound}, resources=CPU)
        await orch.run()
    assert trial.state is TrialState.TERMINATED
    assert 1 <= observed[0] <= bound, observed


async def test_a_cancelled_run_leaves_no_task_waiting(
    tmp_path: Path, fake_ray: FakeRay, orchestrator: MakeOrchestrator
) -> None:
    """``run()`` cancelled while its trial is busy: nothing it started is left pending
    once the experiment has closed. (A waiter left on the loop's "settled" event was
    collected later as "Task was destroyed but it is pending!", logged in whatever
    another test or command was printing then.)"""
    before = asyncio.all_tasks()
    async with orchestrator(storage=tmp_path, name="cancelled") as orch:
        trial = orch.add_trial(Counter, resources=CPU)
        gate = fake_ray.hold(TRAIN, trial=trial.id, after=2)
        runner = asyncio.create_task(orch.run())
        await gate.reached()
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        gate.open()
    await asyncio.sleep(0)  # a task cancelled at close ends at its next step
    left = asyncio.all_tasks() - before - {asyncio.current_task()}
    assert not left, left


async def test_a_first_result_answered_before_its_setup_is_served_after_it(
    tmp_path: Path,
    fake_ray: FakeRay,
    orchestrator: MakeOrchestrator,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 36: a fresh trial's first train call goes right behind its setup, so its
    first step runs before the driver has heard the setup's answer. Held here, that
    answer arrives after the first result: the loop serves the result after it, the
    machine never sees a result from a trial not yet running, and nothing is lost."""
    caplog.set_level(logging.WARNING, logger="orchestrator.engine.loop")
    async with orchestrator(storage=tmp_path, name="ahead", result_buffer=1) as orch:
        trial = orch.add_trial(Counter, stop={"training_iteration": 3}, resources=CPU)
        held = fake_ray.hold("setup", trial=trial.id, answer=True)
        runner = asyncio.create_task(orch.run())
        await held.reached()
        actor = fake_ray.actor_of(trial.actor)
        await until(lambda: any(c.method in TRAIN for c in actor.calls))
        await asyncio.sleep(0.2)  # its answer reaches the loop, ahead of the setup's
        assert trial.state is TrialState.STARTING and trial.iteration == 0
        held.open()
        await asyncio.wait_for(runner, 30)
    assert trial.state is TrialState.TERMINATED and iterations(trial) == [1, 2, 3]
    assert "dropped an event" not in caplog.text
