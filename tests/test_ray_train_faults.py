"""A distributed trial (Ray Train, 2 workers: ``tests/train_gang.py``) survives what
takes part of its gang away, on real Ray.

- A node holding one of its workers is removed: Train's run fails once for the whole
  gang (Train's own ``FailureConfig(max_failures)`` stays 0), the trial fails once and
  restarts from its newest persisted checkpoint on the node left and one added
  afterwards, as an autoscaler would; another trial running meanwhile is untouched.
- Its driver is SIGKILLed mid-sweep: Ray ends the dead driver's trial actors, their Train
  controllers and gangs (no placement group is left holding resources), and a new driver
  with ``resume=True`` continues every distributed trial from its checkpoint.

Every wait is on an event (a hold's marker files, a journaled checkpoint, a failure
counted), never on a sleep. Most of the time is Ray Train starting worker groups.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("ray.train.torch")

from orchestrator import Orchestrator, TrialState  # noqa: E402
from orchestrator.core.journal_format import JOURNAL_KEY  # noqa: E402

from .observe import wait_for  # noqa: E402
from .processes import end_tree, kill_tree  # noqa: E402
from .train_gang import (  # noqa: E402
    DRIVER,
    ON_HEAD,
    gang_trial,
    held,
    live_gangs,
    wait_gangs_released,
)
from .trainables import Recorder, assert_failure_free_history  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
#: Seconds for a whole test on a loaded 2-core machine (a Train run starts in 15-60 s).
TRAIN_TIMEOUT_S = 600
#: A custom resource each added node has one of: a Train worker asks for one, so the
#: two workers of a gang are on two nodes, and neither is on the head.
SLOT = "gang_slot"


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.timeout(TRAIN_TIMEOUT_S)
async def test_a_lost_node_fails_the_gang_once_and_it_resumes_on_the_nodes_left(
    tmp_path: Path, ray_cluster: Any, add_node: Any
) -> None:
    kept, doomed = (add_node(num_cpus=1, resources={SLOT: 1}) for _ in range(2))
    hold = str(tmp_path / "go")  # the gang waits there after 2 epochs, the other trial at 5
    marks = tmp_path / "marks"
    marks.mkdir()
    config = {
        "epochs": 4,
        "name": "gang",
        "holds": {"*": [2, hold]},
        "worker": {"CPU": 0.5, SLOT: 1},
        "train_storage": str(tmp_path / "train"),
    }
    async with Orchestrator(storage=tmp_path / "runs", name="nodes", max_failures=3) as orch:
        # The trial's actor, and with it Train's controller, on the head: the node lost
        # holds a worker only.
        trial = orch.add_trial(gang_trial, config, resources={**DRIVER, **ON_HEAD})
        other = orch.add_trial(
            Recorder,
            {"delay": 0.05, "hold_at": 5, "fast_after": hold, "marks": str(marks)},
            stop={"training_iteration": 20},
            checkpoint_every=5,
            resources={"cpu": 0.25, **ON_HEAD},
        )
        runner = asyncio.create_task(orch.run())

        def ready() -> bool:
            newest = trial.latest_checkpoint
            return (
                held(hold, "gang") == 2
                and newest is not None
                and newest.iteration == 2
                and other.iteration == 5
            )

        await wait_for(ready, timeout=TRAIN_TIMEOUT_S - 120)
        assert sorted(trial.results[-1]["nodes"]) == sorted([kept.node_id, doomed.node_id])
        await asyncio.to_thread(ray_cluster.remove_node, doomed, False)
        await wait_for(lambda: trial.num_failures > 0, timeout=120)
        Path(hold).touch()
        # The gang needs two slots again: a new node brings the second, as an autoscaler
        # would (a node starts in the main thread: Ray sets a signal handler there).
        added = add_node(num_cpus=1, resources={SLOT: 1}, wait=False)
        await asyncio.to_thread(ray_cluster.wait_for_nodes)
        await asyncio.wait_for(runner, timeout=300)

    assert trial.state is TrialState.TERMINATED, trial.error
    assert trial.num_failures == 1, trial.errors  # once for the gang, not once per worker
    epochs = [r["epoch"] for r in trial.results]
    assert epochs == [1, 2, 3, 4], epochs  # no gap, no repeat across the restart
    assert [r["training_iteration"] for r in trial.results] == epochs
    assert [r["start"] for r in trial.results] == [0, 0, 2, 2]  # from its newest checkpoint
    assert sorted(trial.results[2]["nodes"]) == sorted([kept.node_id, added.node_id])
    assert all(r["ranks"] == 3.0 for r in trial.results)
    # The other trial went on through it all in its one process.
    assert other.state is TrialState.TERMINATED and other.num_failures == 0, other.errors
    assert_failure_free_history(other, 20)
    assert (marks / f"{other.id}.setups").read_text() == "x"
    assert len({r["pid"] for r in other.results}) == 1
    await asyncio.to_thread(wait_gangs_released)


GANGS = textwrap.dedent(
    """
    import asyncio, json, sys
    sys.path.insert(0, {root!r})
    from orchestrator import Orchestrator
    from tests.train_gang import DRIVER, gang_trial

    async def main():
        async with Orchestrator(storage={storage!r}, name="gangs", ray_address={address!r},
                                resume={resume!r}) as orch:
            if not {resume!r}:
                for name in ("a", "b"):
                    orch.add_trial(gang_trial, {{"epochs": 4, "name": name,
                                                "holds": {{"*": [2, {hold!r}]}},
                                                "train_storage": {train!r}}},
                                   resources=DRIVER, trial_id=name)
            await orch.run()
        with open({report!r}, "w") as f:
            json.dump({{t.id: [t.state.value, str(t.error),
                              [[r["epoch"], r["training_iteration"], r["start"]]
                               for r in t.results]] for t in orch.trials}}, f)
    asyncio.run(main())
    """
)


@pytest.mark.slow
@pytest.mark.timeout(TRAIN_TIMEOUT_S)
async def test_distributed_trials_resume_after_their_driver_was_killed(
    tmp_path: Path, ray_local: Any
) -> None:
    """The first driver runs on the session's cluster, which outlives it: what Ray does
    with the dead driver's gangs is seen there."""
    from .test_driver_crash import read_journal

    storage, report, hold = tmp_path / "store", tmp_path / "report.json", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = {
        "root": str(ROOT),
        "storage": str(storage),
        "address": ray_local.address,
        "hold": str(hold),
        "train": str(tmp_path / "train"),
        "report": str(report),
    }
    first = subprocess.Popen(
        [sys.executable, "-c", GANGS.format(resume=False, **args)], env=env, cwd=str(ROOT)
    )
    journal = storage / "gangs" / JOURNAL_KEY
    try:
        # Both gangs wait after 2 epochs, their checkpoints of epoch 2 journaled.
        deadline = time.monotonic() + TRAIN_TIMEOUT_S - 200
        while time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            assert first.poll() is None, "the driver exited while its trials were held"
            trials = read_journal(journal) or {}
            saved = {
                name: max(
                    (c["iteration"] for c in trials.get(name, {}).get("checkpoints", [])), default=0
                )
                for name in ("a", "b")
            }
            if all(saved[n] == 2 and held(str(hold), n) == 2 for n in saved):
                break
        else:
            pytest.fail(f"the gangs never both held with a journaled checkpoint: {saved}")
        gangs = await asyncio.to_thread(live_gangs)
        assert len(gangs) == 2, gangs  # one a trial, released below
    finally:
        kill_tree(first.pid)
        first.wait()
    # Ray ends the dead driver's actors, Train's controllers among them, and removes the
    # placement groups they made: nothing of the dead driver keeps a gang's resources.
    await asyncio.to_thread(wait_gangs_released)
    hold.touch()
    second = await asyncio.create_subprocess_exec(
        sys.executable, "-c", GANGS.format(resume=True, **args), env=env, cwd=ROOT
    )
    try:
        assert await asyncio.wait_for(second.wait(), TRAIN_TIMEOUT_S - 300) == 0
    finally:
        await end_tree(second)
    trials = json.loads(report.read_text())
    assert sorted(trials) == ["a", "b"]
    for name, (state, error, results) in trials.items():
        assert state == "TERMINATED", (name, error)
        # epoch, iteration, start: epochs 3 and 4 ran from the checkpoint of epoch 2
        assert results == [[1, 1, 0], [2, 2, 0], [3, 3, 2], [4, 4, 2]], (name, results)
    await asyncio.to_thread(wait_gangs_released)
