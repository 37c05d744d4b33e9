"""A trial's timeline end to end on the fake Ray: a crash after a rollback or an
exploit goes on from the point the run restarted from, never from a checkpoint of the
run it left, and those checkpoints are gone from storage when the run ends. (These were
real-Ray tests, ``tests/test_timeline_ray.py``; the crash is the fake process's end.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from orchestrator import NoCheckpointError, Trial, TrialState
from storage import open_storage

from ..support.fake_engine import MakeOrchestrator
from ..support.observe import committed
from ..support.trainables import assert_failure_free_history
from .trainables import FakeTripwire

CPU = {"cpu": 0.25}


async def reach(trial: Trial, iteration: int, runner: asyncio.Task[object]) -> None:
    """Until the trial has run to ``iteration`` and persisted every checkpoint up to it."""
    while trial.iteration < iteration or trial.checkpoints[-1].iteration < iteration // 10 * 10:
        assert not runner.done(), trial
        await asyncio.sleep(0.02)


async def test_a_crash_after_a_rollback_goes_on_from_the_rollback_point(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    """The issue's case: restore(checkpoint 20) at about 45, then the actor crashes at 25.
    It used to reload checkpoint 40 of the run it had left (history 1..24, 41..60)."""
    wire = tmp_path / "wire"
    async with orchestrator(storage=tmp_path, name="tl", max_failures=1) as orch:
        trial = orch.add_trial(
            FakeTripwire,
            {"delay": 0.05, "tripwire": str(wire), "trip_at": 25},
            stop={"training_iteration": 60},
            checkpoint_every=10,
            resources=CPU,
        )
        runner = asyncio.create_task(orch.run())
        await reach(trial, 45, runner)
        left = list(trial.checkpoints)
        assert [c.iteration for c in left[:4]] == [10, 20, 30, 40]
        wire.touch()  # the count passes 25 again only after the rollback
        await trial.restore(left[1])
        latest = trial.latest_checkpoint
        assert latest is not None and latest.key == left[1].key
        assert [c.key for c in trial.checkpoints] == [c.key for c in left[:2]]
        with pytest.raises(NoCheckpointError, match="abandoned run"):
            await trial.restore(left[3])
        await runner
    assert not wire.exists() and trial.num_failures == 1  # it crashed, once
    assert trial.state is TrialState.TERMINATED, trial.error
    assert_failure_free_history(trial, 60)
    assert [c.iteration for c in trial.checkpoints] == [10, 20, 30, 40, 50, 60]
    # The rolled-back run saved 30 and 40 again under new names; the first ones are gone.
    names = committed(tmp_path / "tl", trial)
    assert names == sorted(c.key.rpartition("/")[2] for c in trial.checkpoints)
    assert "checkpoint_000030.1" in names and "checkpoint_000030" not in names


async def test_a_crash_after_an_exploit_restores_the_state_it_took_over(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    """PBT's exploit is ``restore(donor's checkpoint, config=...)``. A crash before the
    clone saves again restores the donor's checkpoint (it used to restore the clone's
    own newest, the state it had been told to give up); the clone's retention later lets
    go of the donor's checkpoint without deleting it."""
    wire = tmp_path / "wire"
    async with orchestrator(storage=tmp_path, name="ex", max_failures=1) as orch:
        donor = orch.add_trial(
            FakeTripwire, stop={"training_iteration": 30}, checkpoint_every=10, resources=CPU
        )
        config = {"delay": 0.05, "tripwire": str(wire), "trip_at": 25}
        clone = orch.add_trial(
            FakeTripwire,
            config,
            stop={"training_iteration": 60},
            checkpoint_every=10,
            keep_checkpoints=1,
            resources=CPU,
        )
        runner = asyncio.create_task(orch.run())
        await reach(clone, 45, runner)
        await donor.wait()
        own = clone.checkpoints[-1]
        wire.touch()  # the clone's count passes 25 again only after the exploit
        await clone.restore(donor.checkpoints[1], config={**config, "lr": 0.5})
        assert clone.checkpoints == [] and clone.latest_checkpoint == donor.checkpoints[1]
        with pytest.raises(NoCheckpointError, match="abandoned run"):
            await clone.restore(own)
        await runner
    assert not wire.exists() and clone.num_failures == 1
    assert clone.state is TrialState.TERMINATED, clone.error
    assert clone.config["lr"] == 0.5
    assert_failure_free_history(clone, 60)  # 1..20 its own, 21..60 from the donor's 20
    assert committed(tmp_path / "ex", donor) == [f"checkpoint_0000{i}0" for i in (1, 2, 3)]
    assert committed(tmp_path / "ex", clone) == [clone.checkpoints[-1].key.rpartition("/")[2]]
    assert [c.iteration for c in clone.checkpoints] == [60]


async def test_a_resumed_driver_deletes_checkpoints_no_timeline_holds(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    """A driver that dies after journaling a rollback, before its deletes ran, leaves the
    abandoned run's checkpoints in storage: the next driver deletes them on entering."""
    async with orchestrator(storage=tmp_path, name="rs") as orch:
        trial = orch.add_trial(
            FakeTripwire, stop={"training_iteration": 20}, checkpoint_every=10, resources=CPU
        )
        await orch.run()
    abandoned = tmp_path / "abandoned"
    abandoned.mkdir()
    (abandoned / "state.json").write_text('{"count": 30}')
    async with open_storage(tmp_path / "rs") as store:
        await store.put_checkpoint(abandoned, f"{trial.id}/checkpoint_000030")
    assert committed(tmp_path / "rs", trial) == [f"checkpoint_0000{i}0" for i in (1, 2, 3)]
    async with orchestrator(storage=tmp_path, name="rs", resume=True) as orch:
        (resumed,) = orch.trials
        assert [c.iteration for c in resumed.checkpoints] == [10, 20]
    assert committed(tmp_path / "rs", trial) == ["checkpoint_000010", "checkpoint_000020"]
