"""Requests and result hooks through the real dispatcher, with Ray left out.

The loop's own logic (waiters of requests, the hook runner pacing a trial) does not need
Ray: the executor's Ray actions are recorded instead of carried out, and the test plays
the actor by feeding the machine's events through the dispatcher's inbox.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, Trial, TrialError, TrialState
from orchestrator.core.checkpoints import Checkpoint
from orchestrator.core.decisions import Stop
from orchestrator.core.events import (
    ActorReady,
    Decided,
    Launch,
    RestoreDone,
    SaveDone,
    StartActor,
    Train,
    TrainResult,
)
from orchestrator.core.hook_progress import HookProgress
from orchestrator.core.settings import StorageMode
from orchestrator.core.spec import policy_for
from orchestrator.engine.collector import CheckpointCollector
from orchestrator.engine.executor import RaySettings
from orchestrator.engine.hooks import HookRunner
from orchestrator.engine.loop import Dispatcher
from orchestrator.engine.trial_runtime import TrialRuntime

from ..support.trainables import Counter


class Loop:
    """A dispatcher whose Ray calls are recorded in ``ray_calls``."""

    def __init__(self, tmp_path: Path, hooks: list[Any]) -> None:
        self.hooks = HookRunner(hooks)
        self.deleted: list[str] = []
        self.hook_progress = HookProgress()  # as the session binds the experiment's
        self.hook_progress.bind(self.hooks)
        self.dispatcher = Dispatcher(
            RaySettings(str(tmp_path), {}, StorageMode.LOCAL),
            uri_for=lambda key: f"file://{tmp_path}/{key}",
            local_path_for=lambda key: None,
            hooks=self.hooks,
            # Deletions are noted, not carried out: there is no storage here (with none,
            # each delete failed and retried in the background for minutes, into the
            # tests that ran next on this worker's loop).
            collector=CheckpointCollector(None, delete=self._note_deleted),
        )
        # The bookkeeper carries out the rest; every executor action is a Ray call.
        self.ray_calls: list[Any] = []

        def execute(rt: TrialRuntime, action: Any) -> None:
            self.ray_calls.append(action)

        self.dispatcher.executor.execute = execute  # type: ignore[method-assign]
        self.orch = Orchestrator(storage=tmp_path, name="loop", progress=False, loggers=[])

    async def _note_deleted(self, ckpt: Any) -> None:
        self.deleted.append(ckpt.key)

    def add(self, **options: Any) -> TrialRuntime:
        spec = self.orch.trial_spec(Counter, **options)
        policy = policy_for(spec, self.orch.settings, hook_progress=self.hook_progress)
        rt = TrialRuntime(spec, policy)
        Trial(rt, lambda: self.dispatcher)  # its public handle, sending to this loop
        self.dispatcher.attach(rt)
        return rt

    def feed(self, rt: TrialRuntime, event: Any) -> None:
        """Queue an actor's answer as the loop queues a completion's event."""
        self.dispatcher.request(rt, event)

    async def turn(self) -> None:
        """Let the loop and the hooks run until nothing is left to do."""
        for _ in range(20):
            await asyncio.sleep(0)


MakeLoop = Callable[[list[Any]], Loop]


@pytest.fixture
async def loop(tmp_path: Path) -> AsyncIterator[MakeLoop]:
    """Makes a started :class:`Loop` with these hooks; closes it after the test."""
    made: list[Loop] = []

    def make(hooks: list[Any]) -> Loop:
        made.append(Loop(tmp_path, hooks))
        made[-1].dispatcher.start()
        return made[-1]

    yield make
    for each in made:
        await each.dispatcher.aclose()
        await each.hooks.aclose()


def checkpoint(rt: TrialRuntime, iteration: int) -> Checkpoint:
    key = f"{rt.id}/checkpoint_{iteration:06d}"
    return Checkpoint(rt.id, iteration, key, "file:///x/" + key)


async def test_a_restore_of_a_terminated_trial_waits_for_its_own_event(loop: MakeLoop) -> None:
    """A request's waiter is asked whether it is done only once the loop has handled the
    request: an event of the trial handled before it (here a stop, queued first) used to
    find the trial TERMINATED and fail the restore with "the trial is TERMINATED"."""
    lp = loop([])
    rt = lp.add(stop={"training_iteration": 2}, checkpoint_every=1)
    lp.feed(rt, Launch())
    await lp.turn()
    gen = rt.machine.generation
    lp.feed(rt, ActorReady(gen))
    lp.feed(rt, TrainResult(gen, ({"count": 1},)))
    lp.feed(rt, TrainResult(gen, ({"count": 2},)))
    lp.feed(rt, SaveDone(gen, checkpoint(rt, 1)))
    lp.feed(rt, SaveDone(gen, checkpoint(rt, 2)))
    await lp.turn()
    assert rt.machine.state is TrialState.TERMINATED
    trial: Trial = rt.handle
    restoring = asyncio.ensure_future(trial.restore(trial.checkpoints[0]))
    # Queued before the restore's own event (as a completion of the trial arriving
    # meanwhile would be), and handled while the restore's waiter is there.
    lp.dispatcher.request(rt, Decided(Stop(rt.id)))
    await lp.turn()
    assert not restoring.done(), restoring
    assert rt.machine.state is TrialState.STARTING
    gen = rt.machine.generation
    lp.feed(rt, ActorReady(gen))
    lp.feed(rt, RestoreDone(gen, trial.checkpoints[0]))
    assert await asyncio.wait_for(restoring, 10) == trial.checkpoints[0]
    assert rt.machine.state is TrialState.RUNNING  # from iteration 1, short of its stop (2)


def train_calls(actions: list[Any]) -> list[Train]:
    """The train calls sent: a fresh start's first one goes with its StartActor."""
    return [
        a.train if isinstance(a, StartActor) else a
        for a in actions
        if isinstance(a, Train) or (isinstance(a, StartActor) and a.train is not None)
    ]


async def test_a_slow_result_hook_holds_its_trial_two_calls_behind(loop: MakeLoop) -> None:
    """The hook runner counts what the user's result hook has processed, and the trial's
    next call waits for it (WaitForHooks -> HooksCaughtUp through the executor)."""
    gate = asyncio.Event()
    seen: list[int] = []

    class Slow:
        async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
            await gate.wait()
            seen.append(result["training_iteration"])

    lp = loop([Slow()])
    rt = lp.add(result_buffer=3)
    assert rt.machine.policy.hook_progress is not None
    lp.feed(rt, Launch())
    await lp.turn()
    gen = rt.machine.generation
    lp.feed(rt, ActorReady(gen))
    for _ in range(4):  # the actor answers every call it is given
        lp.feed(rt, TrainResult(gen, ({"count": 0},) * 3))
        await lp.turn()
        if not rt.machine.train_in_flight:
            break
    trains = train_calls(lp.ray_calls)
    assert len(trains) == 2 and rt.machine.iteration == 6  # two calls, then it waits
    assert rt.machine.waiting_for_hooks and seen == []
    gate.set()
    await lp.turn()
    assert seen == list(range(1, 7))
    assert len(train_calls(lp.ray_calls)) == 3
    assert not rt.machine.waiting_for_hooks and rt.machine.train_in_flight


async def test_a_trial_waiting_for_itself_from_its_own_hook_is_refused(loop: MakeLoop) -> None:
    errors: list[BaseException] = []

    class Waits:
        async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
            try:
                await trial.wait()
            except TrialError as err:
                errors.append(err)

    lp = loop([Waits()])
    rt = lp.add()
    lp.feed(rt, Launch())
    await lp.turn()
    gen = rt.machine.generation
    lp.feed(rt, ActorReady(gen))
    lp.feed(rt, TrainResult(gen, ({"count": 1},)))
    await lp.turn()
    assert len(errors) == 1 and rt.id in str(errors[0]) and "trial.wait()" in str(errors[0])
