"""Local storage with default options: a checkpoint is wherever a disk holds it.

A restore loads a checkpoint in place when its new actor sees it, streams it from a
live node that sees it when not (transfer/), and falls back to an older checkpoint
only when no live node sees it. ``ray.cluster_utils`` nodes share one disk, so these
tests hide the storage root from one node (``TRIALFLOW_TEST_HIDDEN_ROOT`` in its
raylet's environment, inherited by its workers) or delete checkpoint files for real.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from orchestrator import Checkpoint, Orchestrator, Trial, TrialState
from orchestrator.actor.locality import HIDDEN_ROOT_ENV, is_visible

from ..support.observe import wait_for
from ..support.trainables import Recorder, assert_failure_free_history, kill_worker

pytestmark = [pytest.mark.usefixtures("ray_local")]


@ray.remote(num_cpus=1)
class Blocker:
    """Holds a node's only CPU so that a restarting trial must go elsewhere."""

    def ready(self) -> bool:
        return True


class Restores:
    """Records the checkpoint each trial restored from."""

    def __init__(self) -> None:
        self.restored: dict[str, list[int]] = {}

    def on_trial_restore(self, trial: Trial, checkpoint: Checkpoint) -> None:
        self.restored.setdefault(trial.id, []).append(checkpoint.iteration)


async def move_to_another_node(tmp_path: Path, add_node: Any, **second: Any) -> tuple[Any, ...]:
    """A trial checkpointing on one node whose actor is killed once it has two
    checkpoints, with that node's CPU then taken: it must restart on a second node
    (started with ``second`` options). Returns the trial, the second node and the loop's
    fetch count."""
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
        target = add_node(num_cpus=1, resources={"pool": 1}, **second)
        # Queue a blocker for the first node's CPU, then kill the trial's actor: the
        # blocker takes the CPU, and the restarted actor (after its back-off) must use
        # the second node.
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
    assert trial.node_id == target.node_id
    assert trial.num_failures == 1
    assert_failure_free_history(trial, 60)
    return trial, target, fetches


@pytest.mark.cluster
async def test_a_checkpoint_the_new_node_sees_is_loaded_in_place(
    tmp_path: Path, add_node: Any
) -> None:
    trial, _, fetches = await move_to_another_node(tmp_path, add_node)
    assert fetches == 0  # same disk: nothing streamed


@pytest.mark.cluster
async def test_a_checkpoint_only_its_saver_sees_is_streamed_to_the_new_node(
    tmp_path: Path, add_node: Any
) -> None:
    hidden = {"env_vars": {HIDDEN_ROOT_ENV: str(tmp_path)}}
    trial, target, fetches = await move_to_another_node(tmp_path, add_node, **hidden)
    assert fetches == 1
    assert trial.checkpoints[-1].node_id == target.node_id


def gone(ckpt: Checkpoint) -> None:
    assert ckpt.path is not None
    shutil.rmtree(ckpt.path)


async def test_checkpoints_visible_nowhere_fall_back_then_are_a_clear_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Files really gone: the newest goes first (the trial falls back to the next
    older one), then all (a clear error). Neither is retried by garbage collection."""
    caplog.set_level(logging.INFO, logger="orchestrator")
    restores = Restores()
    async with Orchestrator(
        storage=tmp_path, name="gone", max_failures=3, keep_checkpoints=2, hooks=[restores]
    ) as orch:
        trial = orch.add_trial(
            Recorder,
            {"delay": 0.03},
            stop={"training_iteration": 400},
            checkpoint_every=5,
            resources={"cpu": 0.25},
        )
        runner = asyncio.create_task(orch.run())
        await wait_for(lambda: len(trial.checkpoints) >= 2)
        await trial.pause()
        older, newest = trial.checkpoints[-2:]
        gone(newest)
        await trial.resume()
        await wait_for(lambda: trial.id in restores.restored)
        assert restores.restored[trial.id] == [older.iteration]
        # Training on, retention drops the unloadable one: GC finds it nowhere, once.
        await wait_for(lambda: older.iteration + 15 <= trial.iteration)
        await wait_for(lambda: "visible from no live node" in caplog.text)
        await trial.pause()
        for ckpt in trial.checkpoints:
            gone(ckpt)
        await trial.resume()
        await asyncio.wait_for(runner, timeout=60)
        gc = orch.statistics().gc
    assert gc.failed_attempts == 0
    assert caplog.text.count(newest.uri) >= 1
    assert trial.state is TrialState.ERROR
    message = str(trial.error)
    assert trial.id in message and "no checkpoint can reach its new actor" in message
    assert "not visible from any live node" in message


async def test_gc_leaves_no_dropped_checkpoint_behind(tmp_path: Path) -> None:
    async with Orchestrator(storage=tmp_path, name="gc", keep_checkpoints=2) as orch:
        trial = orch.add_trial(
            Recorder,
            {"delay": 0.005},
            stop={"training_iteration": 60},
            checkpoint_every=3,
            resources={"cpu": 0.25},
        )
        await orch.run()
    assert trial.state is TrialState.TERMINATED, trial.error
    on_disk = {p.name for p in (tmp_path / "gc" / trial.id).iterdir() if p.name.startswith("c")}
    assert on_disk == {Path(c.key).name for c in trial.checkpoints}
    assert len(on_disk) == 2
    assert all(c.path is not None and is_visible(c.path, c.manifest) for c in trial.checkpoints)
