"""Local storage that the nodes do not share: a trial restarting on another node gets
its checkpoint streamed over from the node that saved it (transfer/), and when that
node is gone the trial says so clearly. Two-node ray.cluster_utils clusters."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from orchestrator import Orchestrator, Trial, TrialState

from .trainables import Recorder, kill_worker

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.cluster]


@ray.remote(num_cpus=1)
class Blocker:
    """Holds a node's only CPU so that a restarting trial must go elsewhere."""

    def ready(self) -> bool:
        return True


async def wait_for(predicate: Any, timeout: float = 60) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), timeout)


async def test_restart_on_another_node_streams_the_checkpoint(
    tmp_path: Path, add_node: Any
) -> None:
    first = add_node(num_cpus=1, resources={"pool": 1})
    async with Orchestrator(
        storage=tmp_path, name="nl", max_failures=1, failure_backoff=1.0
    ) as orch:
        trial = orch.add_trial(
            Recorder,
            {"delay": 0.02},
            stop={"training_iteration": 60},
            checkpoint_every=5,
            resources={"cpu": 1, "pool": 1},
        )
        runner = asyncio.create_task(orch.run())
        await wait_for(lambda: len(trial.checkpoints) >= 2)
        assert trial.node_id == first.node_id
        assert all(c.node_id == first.node_id for c in trial.checkpoints)
        second = add_node(num_cpus=1, resources={"pool": 1})
        # Queue a blocker for the first node's CPU, then kill the trial's actor: the
        # blocker takes the CPU, and the restarted actor (after its back-off) must use
        # the second node, while the checkpoints stay on the first node's disk.
        blocker = Blocker.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(first.node_id, soft=False)
        ).remote()
        assert trial.last_result is not None
        kill_worker(trial.last_result["pid"])
        await asyncio.wait_for(runner, timeout=120)
        fetches = orch.statistics().loop.fetches
        await blocker.ready.remote()
        ray.kill(blocker)
    assert trial.state is TrialState.TERMINATED, trial.error
    assert trial.node_id == second.node_id
    assert trial.num_failures == 1
    assert fetches == 1
    its = [r["training_iteration"] for r in trial.results]
    assert its == list(range(1, 61))
    assert all(r["count"] == r["training_iteration"] for r in trial.results)
    assert trial.checkpoints[-1].node_id == second.node_id


async def test_checkpoints_on_a_dead_node_are_a_clear_error(
    tmp_path: Path, ray_cluster: Any, add_node: Any
) -> None:
    doomed = add_node(num_cpus=1, resources={"pool": 1})
    errors: list[BaseException] = []

    class Errors:
        def on_trial_error(self, trial: Trial, error: BaseException) -> None:
            errors.append(error)

    async with Orchestrator(
        storage=tmp_path, name="dead", max_failures=2, hooks=[Errors()]
    ) as orch:
        trial = orch.add_trial(
            Recorder,
            {"delay": 0.02},
            stop={"training_iteration": 500},
            checkpoint_every=5,
            resources={"cpu": 1, "pool": 1},
        )
        runner = asyncio.create_task(orch.run())
        await wait_for(lambda: len(trial.checkpoints) >= 2)
        add_node(num_cpus=1, resources={"pool": 1})
        ray_cluster.remove_node(doomed, allow_graceful=False)
        await asyncio.wait_for(runner, timeout=120)
    assert trial.state is TrialState.ERROR
    message = str(trial.error)
    assert trial.id in message and "no checkpoint can reach its new actor" in message
    assert "storage_shared=True" in message
