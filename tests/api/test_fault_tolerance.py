"""Failures that only real Ray can stage: a node of the cluster dies, and a node's
checkpoint uploader (a persister actor) is killed. Nothing is lost beyond the newest
persisted checkpoint, and the history equals a failure-free run's. The engine's failure
logic (random kills, corrupted checkpoints, shared processes, spares) runs on the fake
Ray: ``tests/engine/test_failures.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, TrialState

from ..support.observe import Timeline, assert_moved_whole, busiest_node, wait_for
from ..support.trainables import Counter, Recorder, assert_failure_free_history

pytestmark = pytest.mark.usefixtures("ray_local")


@pytest.mark.cluster
async def test_node_loss_moves_trials_to_the_surviving_node(
    tmp_path: Path, ray_cluster: Any, add_node: Any
) -> None:
    """Default options: local storage, storage_shared left False. The nodes share the
    disk (one machine, as with NFS), so the moved trials load their newest checkpoint
    in place: nothing is streamed."""
    nodes = [add_node(num_cpus=2, resources={"worker": 100}) for _ in range(2)]
    timeline = Timeline()
    async with Orchestrator(
        storage=tmp_path, name="nodes", max_failures=2, hooks=[timeline]
    ) as orch:
        trials = [
            orch.add_trial(
                Counter,
                {"delay": 0.03},
                stop={"training_iteration": 80},
                checkpoint_every=5,
                resources={"cpu": 0.25, "worker": 1},
            )
            for _ in range(6)
        ]
        runner = asyncio.create_task(orch.run())
        await wait_for(lambda: all(t.iteration >= 10 for t in trials))
        doomed, survivor, moved = busiest_node(trials, nodes)
        ray_cluster.remove_node(doomed, allow_graceful=False)
        await asyncio.wait_for(runner, timeout=120)
        fetches = orch.statistics().loop.fetches
    assert_moved_whole(trials, moved, survivor.node_id, timeline, 80)
    assert fetches == 0


async def test_a_killed_checkpoint_uploader_is_replaced(tmp_path: Path) -> None:
    import ray

    final, gate = 150, tmp_path / "gate"  # the trial waits there after 20 steps
    gate.mkdir()
    async with Orchestrator(storage=tmp_path, name="uploader", max_failures=2) as orch:
        trial = orch.add_trial(
            Recorder,
            # padding: too many files to commit in place
            {"delay": 0.02, "padding_files": 9, "gate": str(gate), "gate_at": 20},
            stop={"training_iteration": final},
            checkpoint_every=5,
            resources={"cpu": 0.25},
        )
        runner = asyncio.create_task(orch.run())
        pool = orch._dispatcher.executor.persisters
        while not pool._ready and not runner.done():
            await asyncio.sleep(0.05)
        assert not runner.done(), "the trial finished before its node's uploader was up"
        ((_, uploader),) = pool._by_node.items()
        ray.kill(uploader, no_restart=True)
        (gate / "open").touch()  # the trial goes on: its next checkpoints need a new one
        await runner
    assert trial.state is TrialState.TERMINATED, trial.error
    assert_failure_free_history(trial, final)
    assert trial.checkpoints[-1].iteration == final
    assert trial.num_failures <= 1  # at most the save that was in flight when it died
