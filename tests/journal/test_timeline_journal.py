"""A trial's timeline across the journal, a resumed driver and garbage collection: real
local storage and a real journal, the machines driven by hand (no Ray)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from orchestrator import Orchestrator, Trial
from orchestrator.core.checkpoints import Checkpoint
from orchestrator.core.decisions import RestoreFrom
from orchestrator.core.events import (
    ActorReady,
    Decided,
    Launch,
    RestoreDone,
    SaveDone,
    TrainResult,
)
from orchestrator.engine.adoption import adopt, off_timeline_keys
from orchestrator.engine.collector import CheckpointCollector
from orchestrator.journal.reader import load as load_journal
from orchestrator.journal.writer import Journal
from orchestrator.sweeps.scheduler_judge import info_of
from storage import Storage, open_storage

from ..support.trainables import Counter


async def commit(store: Storage, scratch: Path, trial_id: str, iteration: int) -> Checkpoint:
    """A real committed checkpoint of ``trial_id`` at ``iteration`` in ``store``, named
    as the loop names it (``.N`` when the iteration was saved before)."""
    key = base = f"{trial_id}/checkpoint_{iteration:06d}"
    n = 0
    while (scratch / key).exists():
        n += 1
        key = f"{base}.{n}"
    local = scratch / key
    local.mkdir(parents=True)
    (local / "state.json").write_text(f'{{"count": {iteration}}}')
    manifest = await store.put_checkpoint(local, key)
    return Checkpoint(trial_id, iteration, key, store.uri_for(key), manifest=manifest.to_dict())


async def run_to(store: Storage, scratch: Path, trial: Trial, iteration: int) -> None:
    """Drive the trial's machine to ``iteration``, each due checkpoint committed."""
    m = trial._rt.machine
    if m.state.value == "PENDING":
        m.handle(Launch())
        m.handle(ActorReady(m.generation))
    while m.iteration < iteration:
        m.handle(TrainResult(m.generation, ({"x": 1},)))
        if m.saves_in_flight:
            m.handle(SaveDone(m.generation, await commit(store, scratch, trial.id, m.iteration)))


def restore(trial: Trial, target: Checkpoint) -> None:
    m = trial._rt.machine
    config = {"lr": 0.1} if target.trial_id != trial.id else None
    m.handle(Decided(RestoreFrom(trial.id, target, config)))
    m.handle(TrainResult(m.generation, ({"x": 1},)))
    m.handle(RestoreDone(m.generation, target))


async def test_a_resumed_driver_never_picks_an_abandoned_checkpoint_and_deletes_it(
    tmp_path: Path,
) -> None:
    """``a`` rolls back to 20 at 45; ``b`` exploits ``a``'s checkpoint at 40 (decided
    before ``a`` rolled back, so it stays ``b``'s origin); the driver dies after the
    journal write and before any delete. The resumed driver restarts ``a`` from 20 and
    ``b`` from ``a``'s 40, and deletes what no timeline holds: ``a``'s 30 (never its
    40, which ``b`` needs) and ``b``'s own from before the exploit."""
    orch = Orchestrator(storage=tmp_path / "unused", name="exp")
    a = orch.add_trial(Counter, trial_id="a", checkpoint_every=10)
    b = orch.add_trial(Counter, trial_id="b", checkpoint_every=10)
    scratch = tmp_path / "scratch"
    async with open_storage(tmp_path / "store", create=True) as store:
        await run_to(store, scratch, a, 45)
        await run_to(store, scratch, b, 15)
        restore(b, a._rt.machine.checkpoints[-1])
        restore(a, a._rt.machine.checkpoints[1])
        assert a.latest_checkpoint is not None and a.latest_checkpoint.iteration == 20
        journal = Journal(store, name="exp", interval=0.01)
        journal.track(a._rt)
        journal.track(b._rt)
        await journal.flush()

        loaded = {entry.id: entry for entry in await load_journal(store) or []}
        assert [c.iteration for c in loaded["a"].checkpoints] == [10, 20]
        assert loaded["b"].checkpoints == []
        origin = loaded["b"].origin
        assert origin is not None and origin.key == "a/checkpoint_000040"
        resumed = {i: adopt(entry, orch.settings) for i, entry in loaded.items()}
        for trial_id, target in (("a", "a/checkpoint_000020"), ("b", "a/checkpoint_000040")):
            machine = resumed[trial_id].machine
            latest = machine.latest_checkpoint
            assert latest is not None and latest.key == target
            assert machine.iteration == latest.iteration
        assert off_timeline_keys(resumed.values()) == [
            ("a", "a/checkpoint_000030"),
            ("b", "b/checkpoint_000010"),  # its own line before the exploit
        ]
        # The keys storage still holds are never given to a new save.
        assert "a/checkpoint_000040" in resumed["a"].stored_keys


async def test_pbt_never_sees_an_abandoned_checkpoint_as_a_trials_newest(tmp_path: Path) -> None:
    """PBT picks donors by their newest checkpoint: after an exploit that is the state
    the trial took over, never its own from before (which another trial would clone)."""
    orch = Orchestrator(storage=tmp_path / "unused", name="exp")
    clone = orch.add_trial(Counter, trial_id="clone", checkpoint_every=10)
    scratch = tmp_path / "scratch"
    async with open_storage(tmp_path / "store", create=True) as store:
        await run_to(store, scratch, clone, 45)
        donor = await commit(store, scratch, "donor", 20)
        restore(clone, donor)
        assert info_of(clone._rt).checkpoint == donor
        await run_to(store, scratch, clone, 30)
        newest = info_of(clone._rt).checkpoint
        assert newest is not None and newest.key == "clone/checkpoint_000030.1"


def _ckpt(key: str) -> Checkpoint:
    return Checkpoint(key.partition("/")[0], 1, key, "file:///x/" + key)


async def test_the_collector_deletes_a_checkpoint_asked_for_twice_once() -> None:
    deleted: list[str] = []

    async def delete(ckpt: Checkpoint) -> None:
        await asyncio.sleep(0.01)
        deleted.append(ckpt.key)

    collector = CheckpointCollector(None, delete=delete, retry_delay=0.01)
    collector.submit((_ckpt("a/1"), _ckpt("a/2")))
    collector.submit((_ckpt("a/1"),))  # its owner dropped it, and a clone let go of it
    await collector.drain()
    assert sorted(deleted) == ["a/1", "a/2"]


async def test_the_collector_keeps_at_exit_what_a_timeline_still_pins() -> None:
    deleted: list[str] = []
    pinned = {"a/1"}

    async def delete(ckpt: Checkpoint) -> None:
        deleted.append(ckpt.key)

    collector = CheckpointCollector(
        None, delete=delete, is_pinned=lambda key: key in pinned, retry_delay=0.01
    )
    collector.submit((_ckpt("a/1"), _ckpt("a/2")))
    await asyncio.sleep(0.05)
    assert deleted == ["a/2"]  # a/1 waits for its pin
    await asyncio.wait_for(collector.drain(), timeout=5.0)  # returns without a/1
    assert deleted == ["a/2"]
