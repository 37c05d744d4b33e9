"""Failures of every kind end the same way: nothing lost beyond the newest persisted
checkpoint, and the history equals a failure-free run's. Real Ray, real processes."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, Trial, TrialState
from storage import MANIFEST_NAME

from .trainables import Counter, Recorder, assert_failure_free_history, kill_worker

pytestmark = pytest.mark.usefixtures("ray_local")

ROOT = Path(__file__).resolve().parent.parent


async def test_chaos_sigkill_random_actors_every_second(tmp_path: Path) -> None:
    final = 60
    async with Orchestrator(
        storage=tmp_path, name="chaos", max_failures=-1, failure_backoff=0.05
    ) as orch:
        trials = [
            orch.add_trial(
                Recorder,
                {"delay": 0.03},
                stop={"training_iteration": final},
                checkpoint_every=4,
                resources={"cpu": 0.25},
            )
            for _ in range(8)
        ]
        runner = asyncio.create_task(orch.run())
        rng = random.Random(7)
        kills = 0
        while not runner.done() and kills < 8:  # one kill a second, 8 in all
            await asyncio.sleep(1.0)
            live = [t for t in trials if t.state is TrialState.RUNNING and t.last_result]
            if live:
                victim = rng.choice(live)
                assert victim.last_result is not None
                try:
                    kill_worker(victim.last_result["pid"])
                    kills += 1
                except ProcessLookupError:
                    pass
        await runner
    assert kills >= 2
    assert sum(t.num_failures for t in trials) >= 1
    for trial in trials:
        assert trial.state is TrialState.TERMINATED, (trial.id, trial.error)
        assert_failure_free_history(trial, final)


async def test_gc_keeps_exactly_the_best_and_newest(tmp_path: Path) -> None:
    async with Orchestrator(
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
        on_disk = sorted(
            p.name for p in (tmp_path / "gc" / trial.id).iterdir() if (p / MANIFEST_NAME).exists()
        )
        assert on_disk == ["checkpoint_000006", "checkpoint_000020"]


async def test_corrupted_checkpoint_falls_back_to_the_previous_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
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
                kill_worker(result["pid"])

    async with Orchestrator(
        storage=tmp_path, name="corrupt", max_failures=1, hooks=[CorruptThenKill()]
    ) as orch:
        trial = orch.add_trial(
            Recorder,
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


class Timeline:
    """Each trial's hook events in order: its checkpoints, failures and restores."""

    def __init__(self) -> None:
        self.events: dict[str, list[tuple[str, int]]] = {}

    def _add(self, trial: Trial, kind: str, iteration: int) -> None:
        self.events.setdefault(trial.id, []).append((kind, iteration))

    def on_checkpoint(self, trial: Trial, checkpoint: Any) -> None:
        self._add(trial, "checkpoint", checkpoint.iteration)

    def on_trial_error(self, trial: Trial, error: BaseException) -> None:
        self._add(trial, "error", -1)

    def on_trial_restore(self, trial: Trial, checkpoint: Any) -> None:
        self._add(trial, "restore", checkpoint.iteration)

    def restored_from_newest(self, trial_id: str) -> bool:
        """Whether every restore loaded the newest checkpoint persisted before it."""
        newest, ok = 0, True
        for kind, iteration in self.events.get(trial_id, []):
            if kind == "checkpoint":
                newest = max(newest, iteration)
            elif kind == "restore":
                ok = ok and iteration == newest
        return ok


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
        while not all(t.iteration >= 10 for t in trials):
            await asyncio.sleep(0.05)
        by_node: dict[str, list[Trial]] = {}
        for trial in trials:
            assert trial.node_id is not None
            by_node.setdefault(trial.node_id, []).append(trial)
        doomed = max(nodes, key=lambda n: len(by_node.get(n.node_id, [])))
        survivor = next(n for n in nodes if n is not doomed)
        moved = by_node.get(doomed.node_id, [])
        assert moved
        ray_cluster.remove_node(doomed, allow_graceful=False)
        await asyncio.wait_for(runner, timeout=120)
        fetches = orch.statistics().loop.fetches
    for trial in trials:
        assert trial.state is TrialState.TERMINATED, trial.error
        assert_failure_free_history(trial, 80)
        assert trial.node_id == survivor.node_id
    for trial in moved:
        assert trial.num_failures >= 1
        restores = [i for kind, i in timeline.events[trial.id] if kind == "restore"]
        assert restores and min(restores) >= 5  # from a checkpoint, not from scratch
        assert timeline.restored_from_newest(trial.id), timeline.events[trial.id]
    assert fetches == 0


async def test_a_killed_checkpoint_uploader_is_replaced(tmp_path: Path) -> None:
    import ray

    final = 150
    async with Orchestrator(storage=tmp_path, name="uploader", max_failures=2) as orch:
        trial = orch.add_trial(
            Recorder,
            {"delay": 0.02, "padding_files": 9},  # too many files to commit in place
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
        await runner
    assert trial.state is TrialState.TERMINATED, trial.error
    assert_failure_free_history(trial, final)
    assert trial.checkpoints[-1].iteration == final
    assert trial.num_failures <= 1  # at most the save that was in flight when it died
