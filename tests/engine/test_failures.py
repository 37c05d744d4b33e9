"""Failures on the fake Ray: actors killed at random, a corrupted checkpoint, a shared
process killed, warm spares taking restarts, retention under failures. A kill is the
fake actor's death, as Ray reports a SIGKILLed worker's (``ActorDiedError``); each
trainable reports its fake process as ``pid``. These were real-Ray tests
(``test_fault_tolerance``, ``test_spares``, ``test_packing``); the real process deaths
stay proved there and in ``test_orchestrator``.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Trial, TrialState

from ..support.cluster import HEAD_CPUS
from ..support.fake_engine import MakeOrchestrator, MakeRuntime
from ..support.fakeray import FakeRay
from ..support.observe import Timeline, assert_moved_whole, busiest_node, committed, wait_for
from ..support.trainables import Counter, assert_failure_free_history
from .trainables import FakeRecorder


async def test_chaos_kills_random_actors_ten_times_a_second(
    tmp_path: Path, fake_ray: FakeRay, orchestrator: MakeOrchestrator
) -> None:
    # Every trial waits after step 30 (not a checkpoint's: a restarted one reports with
    # its new pid before it waits) until the 8 kills are done: none can end first.
    final, gate = 60, tmp_path / "gate"
    gate.mkdir()
    async with orchestrator(
        storage=tmp_path, name="chaos", max_failures=-1, failure_backoff=0.05
    ) as orch:
        trials = [
            orch.add_trial(
                FakeRecorder,
                {"delay": 0.01, "gate": str(gate), "gate_at": 30},
                stop={"training_iteration": final},
                checkpoint_every=4,
                resources={"cpu": 0.25},
            )
            for _ in range(8)
        ]
        runner = asyncio.create_task(orch.run())
        rng = random.Random(7)
        kills = 0
        # One kill every 0.1 s, 8 in all (the last results a batch still holds may name a
        # process already killed: a bounded wait, not a speed assumption).
        deadline = time.monotonic() + 120
        while not runner.done() and kills < 8 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            live = [t for t in trials if t.state is TrialState.RUNNING and t.last_result]
            if live:
                victim = rng.choice(live)
                assert victim.last_result is not None
                try:
                    fake_ray.kill_worker(victim.last_result["pid"])
                    kills += 1
                except ProcessLookupError:
                    pass
        (gate / "open").touch()
        await runner
    assert kills >= 2
    assert sum(t.num_failures for t in trials) >= 1
    for trial in trials:
        assert trial.state is TrialState.TERMINATED, (trial.id, trial.error)
        assert_failure_free_history(trial, final)


async def test_gc_keeps_exactly_the_best_and_newest(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(
        storage=tmp_path, name="gc", keep_checkpoints=2, checkpoint_score=("score", "max")
    ) as orch:
        trials = [
            orch.add_trial(
                Counter,
                stop={"training_iteration": 20},
                checkpoint_every=2,
                resources={"cpu": 0.25},
            )
            for _ in range(2)
        ]
        await orch.run()
    # scores (count % 7) at 2,4..20: 2,4,6,1,3,5,0,2,4,6 -> best: 6 (at 20 and 6); newest 20
    for trial in trials:
        assert [c.iteration for c in trial.checkpoints] == [6, 20]
        assert committed(tmp_path / "gc", trial) == ["checkpoint_000006", "checkpoint_000020"]


async def test_corrupted_checkpoint_falls_back_to_the_previous_one(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    fake_ray: FakeRay,
    orchestrator: MakeOrchestrator,
) -> None:
    class CorruptThenKill:
        done = False

        async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
            # Once the checkpoint of iteration 10 is persisted (uploads run beside
            # training), corrupt the newest checkpoint and kill the actor.
            persisted = [c.iteration for c in trial.checkpoints]
            if 10 in persisted and result["training_iteration"] > 10 and not self.done:
                self.done = True
                newest = trial.checkpoints[-1]
                assert newest.path is not None and newest.iteration >= 10
                # Same size, other bytes: it looks complete, and only its checksum
                # tells (a checkpoint of another size is not even visible).
                state = Path(newest.path) / "state.json"
                state.write_text("".join("9" if c.isdigit() else c for c in state.read_text()))
                fake_ray.kill_worker(result["pid"])

    async with orchestrator(
        storage=tmp_path, name="corrupt", max_failures=1, hooks=[CorruptThenKill()]
    ) as orch:
        trial = orch.add_trial(
            FakeRecorder,
            {"delay": 0.02},
            stop={"training_iteration": 40},
            checkpoint_every=5,
            resources={"cpu": 0.25},
        )
        await orch.run()
    assert trial.state is TrialState.TERMINATED, trial.error
    assert trial.num_failures == 2  # the kill, then the unloadable checkpoint
    assert_failure_free_history(trial, 40)
    assert "checksum" in caplog.text or "IntegrityError" in caplog.text


async def test_a_restart_goes_to_the_spare_which_is_then_replaced(
    tmp_path: Path, fake_ray: FakeRay, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="spare", max_failures=2, progress=False) as orch:
        trial = orch.add_trial(  # it runs until the test stops it, however slow the machine
            FakeRecorder,
            {"delay": 0.02},
            stop={"training_iteration": 100_000},
            checkpoint_every=5,
            resources={"cpu": 0.25},
        )
        runner = asyncio.create_task(orch.run())
        spares = orch._dispatcher.executor.spares  # type: ignore[union-attr]
        hosts = orch._dispatcher.executor.hosts  # type: ignore[union-attr]
        await wait_for(lambda: spares.started == 1 and trial.checkpoints, every=0.02)
        (spare,) = hosts.spares()
        assert trial.last_result is not None
        fake_ray.kill_worker(trial.last_result["pid"])
        await wait_for(lambda: spares.used == 1, every=0.02)
        assert trial.actor is spare.actor  # the restart went to the warm actor
        await wait_for(lambda: spares.started == 2, every=0.02)  # and a new spare started
        await trial.stop()
        await asyncio.wait_for(runner, 120)
        left = hosts.spares()
    assert trial.state is TrialState.TERMINATED and trial.num_failures == 1
    assert_failure_free_history(trial)
    assert left == []  # retired once no trial could fail any more


async def test_no_spare_takes_resources_a_trial_needs(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="full", max_failures=1, progress=False) as orch:
        trials = [
            orch.add_trial(
                FakeRecorder, {"delay": 0.02}, stop={"training_iteration": 40}, resources={"cpu": 1}
            )
            for _ in range(HEAD_CPUS + 2)  # more than the head node holds at once
        ]
        await orch.run()
        spares = orch._dispatcher.executor.spares  # type: ignore[union-attr]
    assert all(t.state is TrialState.TERMINATED for t in trials)
    # While trials waited for CPUs, none went to a spare; once all ran, one may have.
    assert spares.started <= 1


async def test_no_spares_when_trials_may_not_fail(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="nofail", progress=False) as orch:
        orch.add_trial(
            FakeRecorder, {"delay": 0.01}, stop={"training_iteration": 50}, resources={"cpu": 0.25}
        )
        await orch.run()
        assert orch._dispatcher.executor.spares.started == 0  # type: ignore[union-attr]


async def test_packed_trials_share_processes_and_a_failing_step_fails_only_its_trial(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    final = 30
    async with orchestrator(
        storage=tmp_path, name="packed", max_failures=1, trials_per_worker=3, failure_backoff=0
    ) as orch:
        trials = [
            orch.add_trial(
                FakeRecorder,
                {"delay": 0.01, "marks": str(tmp_path), "fail_once_at": 12 if i == 0 else None},
                stop={"training_iteration": final},
                checkpoint_every=5,
                resources={"cpu": 0.2},
            )
            for i in range(6)
        ]
        await orch.run()
    for trial in trials:
        assert trial.state is TrialState.TERMINATED, (trial.id, trial.error)
        assert_failure_free_history(trial, final)
    assert trials[0].num_failures == 1
    assert all(t.num_failures == 0 for t in trials[1:])
    pids = {r["pid"] for t in trials for r in t.results}
    assert len(pids) == 2  # six trials, three to a process
    # The failed trial came back into its own process (its slot was free): no new one.
    assert len({r["pid"] for r in trials[0].results}) == 1


async def test_killing_a_shared_process_restores_each_of_its_trials(
    tmp_path: Path, fake_ray: FakeRay, orchestrator: MakeOrchestrator
) -> None:
    final = 40
    killed: list[int] = []

    class KillOnce:
        def on_trial_result(self, trial: Any, result: dict[str, Any]) -> None:
            if result["training_iteration"] == 15 and not killed:
                killed.append(result["pid"])
                fake_ray.kill_worker(result["pid"])

    async with orchestrator(
        storage=tmp_path,
        name="packed-kill",
        max_failures=1,
        trials_per_worker=4,
        failure_backoff=0,
        hooks=[KillOnce()],
    ) as orch:
        trials = [
            orch.add_trial(
                FakeRecorder,
                {"delay": 0.01},
                stop={"training_iteration": final},
                checkpoint_every=5,
                resources={"cpu": 0.25},
            )
            for _ in range(4)
        ]
        await asyncio.wait_for(orch.run(), 120)
    assert killed
    for trial in trials:
        assert trial.state is TrialState.TERMINATED, (trial.id, trial.error)
        assert trial.num_failures == 1  # all four lived in the killed process
        assert_failure_free_history(trial, final)
    after = {r["pid"] for t in trials for r in t.results if r["pid"] != killed[0]}
    # They fail together and restart together, in one new process (two if Ray reported
    # the deaths in two batches), not one process each.
    assert 1 <= len(after) <= 2, after


async def test_node_loss_moves_trials_to_the_surviving_node(
    tmp_path: Path, fake_ray: FakeRay, orchestrator: MakeOrchestrator
) -> None:
    """Two worker nodes; the one with more trials dies: its trials restore their newest
    checkpoint on the other (the disk is shared: nothing is streamed). The real node
    death is ``tests/api/test_fault_tolerance.py``'s."""
    nodes = [fake_ray.add_node(f"worker-{i}", {"CPU": 2.0, "worker": 100.0}) for i in (1, 2)]
    timeline = Timeline()
    async with orchestrator(
        storage=tmp_path, name="nodes", max_failures=2, hooks=[timeline]
    ) as orch:
        trials = [
            orch.add_trial(
                Counter,
                {"delay": 0.01},
                stop={"training_iteration": 80},
                checkpoint_every=5,
                resources={"cpu": 0.25, "worker": 1},
            )
            for _ in range(6)
        ]
        runner = asyncio.create_task(orch.run())
        await wait_for(lambda: all(t.iteration >= 10 for t in trials), every=0.02)
        doomed, survivor, moved = busiest_node(trials, nodes)
        fake_ray.kill_node(doomed.name)
        await asyncio.wait_for(runner, timeout=120)
        fetches = orch.statistics().loop.fetches
    assert_moved_whole(trials, moved, survivor.node_id, timeline, 80)
    assert fetches == 0


async def test_an_idle_kept_worker_is_the_shapes_spare(
    fake_ray: FakeRay, runtime: MakeRuntime
) -> None:
    """Reuse's idle workers and restart spares are one pool: no process starts for a
    spare while a started worker of the shape sits idle; without one, a spare starts."""
    from orchestrator.core.placement import Host, HostPool, resource_key
    from orchestrator.engine.spares import Spares

    shape = {"cpu": 0.25}
    trial = runtime(max_failures=1, resources=shape)  # it may fail: spares are wanted
    hosts = HostPool(1, keep_idle=True)
    created: list[Host] = []

    def create(host: Host) -> object:
        created.append(host)
        return object()

    spares = Spares(hosts, create, lambda: [trial], count=1, backend=fake_ray)
    kept = Host(resource_key(shape), shape, 1)
    hosts.add_idle(kept)  # a finished trial's worker, kept for the next trial
    spares.consider(shape)
    await asyncio.sleep(0.05)
    assert spares.started == 0 and created == []
    hosts.take_idle()  # reuse is over: the kept worker goes
    spares.consider(shape)
    await wait_for(lambda: spares.started == 1)
    assert len(created) == 1 and hosts.spares() == created
