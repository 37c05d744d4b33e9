"""The orchestrator's wiring to Ray, on the session's real Ray cluster.

The engine's logic runs on the fake Ray (``tests/engine/``); what only real Ray can say
is here: real actors start, train, save (committing small checkpoints themselves, their
node's persister actor uploading large ones), die for real and restore; a script's
``run_sync`` uses the Ray it finds.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import ray

from orchestrator import Orchestrator, Trial, TrialState
from storage import MANIFEST_NAME

from ..support.observe import committed
from ..support.trainables import Counter, assert_failure_free_history

pytestmark = pytest.mark.usefixtures("ray_local")

CPU = {"cpu": 0.25}


async def test_a_killed_actor_restores_what_its_nodes_uploader_persisted(tmp_path: Path) -> None:
    """Real actors, one of them killed with ``ray.kill`` at iteration 8: it restores its
    newest checkpoint, which its node's persister uploaded (ten files: too many to
    commit in place); the other trial's small checkpoints are committed by its actor."""

    class Killer:
        target = ""
        killed = False

        async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
            if trial.id == self.target and result["training_iteration"] == 8 and not self.killed:
                self.killed = True
                ray.kill(trial.actor)

    killer = Killer()
    async with Orchestrator(
        storage=tmp_path, name="kill", max_failures=1, keep_checkpoints=2, hooks=[killer]
    ) as orch:
        trial = orch.add_trial(
            Counter,
            {"delay": 0.01, "padding_files": 9},
            stop={"training_iteration": 25},
            checkpoint_every=3,
            resources=CPU,
        )
        killer.target = trial.id
        bystander = orch.add_trial(
            Counter, stop={"training_iteration": 25}, checkpoint_every=5, resources=CPU
        )
        await orch.run()
        persisters = orch._dispatcher.executor.persisters  # type: ignore[union-attr]
        assert len(persisters._by_node) == 1
        await asyncio.sleep(0.5)  # let the background GC finish its deletes
    assert trial.state is TrialState.TERMINATED and killer.killed
    assert trial.num_failures == 1
    assert_failure_free_history(trial, 25)
    assert bystander.state is TrialState.TERMINATED and bystander.num_failures == 0
    assert_failure_free_history(bystander, 25)
    root = tmp_path / "kill"
    assert committed(root, trial) == ["checkpoint_000024", "checkpoint_000025"]
    assert committed(root, bystander) == ["checkpoint_000020", "checkpoint_000025"]
    for each, files in ((trial, 10), (bystander, 1)):
        manifest = json.loads((Path(each.checkpoints[-1].path or "") / MANIFEST_NAME).read_text())
        assert len(manifest["files"]) == files


def test_run_sync_for_plain_scripts(tmp_path: Path) -> None:
    orch = Orchestrator(storage=str(tmp_path), name="sync")
    trial = orch.add_trial(Counter, stop={"training_iteration": 3}, resources=CPU)
    trials = orch.run_sync()
    assert trials == [trial] and trial.state is TrialState.TERMINATED
    assert ray.is_initialized()  # it used the session's Ray and left it running
