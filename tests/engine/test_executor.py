"""The executor's Ray calls (``engine/executor.py``) against the fake Ray.

The loop is replaced by a recorder of what the executor hands it (its in-flight table
and its requests); the actors are the real trial actor and persister in-process, so a
call's answer is what a worker would send back (a real step, a real checkpoint in the
test's storage, a real restore).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ray.exceptions import TaskCancelledError

from orchestrator.core.checkpoints import Checkpoint
from orchestrator.core.events import Event, Launch, Restore, Save, StartActor, StopActor, Train
from orchestrator.core.settings import StorageMode
from orchestrator.engine.collector import CheckpointCollector
from orchestrator.engine.executor import Executor, RaySettings
from orchestrator.engine.outcomes import (
    CallKind,
    FetchPayload,
    LoadStreamed,
    Payload,
    Pending,
    Placed,
    RestorePayload,
    SavePayload,
    StopPayload,
    Stream,
    Upload,
)
from orchestrator.engine.trial_runtime import TrialRuntime
from orchestrator.errors import CheckpointNotVisible
from storage import MANIFEST_NAME

from ..support.fake_engine import MakeRuntime, until
from ..support.fakeray import FakeRay

CPU = {"cpu": 0.5}


@dataclass
class Tracked:
    runtime: TrialRuntime
    kind: CallKind
    ref: Any  # a FakeRef, or an asyncio task for a stream
    payload: Payload

    async def answer(self) -> Any:
        if isinstance(self.ref, asyncio.Task):
            return await self.ref
        return await asyncio.wrap_future(self.ref.future())


class Recorder:
    """The loop as the executor sees it (``executor.Tracker``), recording."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        self.trials: dict[str, TrialRuntime] = {}
        self.tracked: list[Tracked] = []
        self.requests: list[tuple[TrialRuntime, Event]] = []

    def track(self, rt: TrialRuntime, kind: CallKind, ref: Any, payload: Payload = None) -> None:
        self.tracked.append(Tracked(rt, kind, ref, payload))

    def track_pending(self, pending: Pending, ref: Any) -> None:
        self.tracked.append(Tracked(pending.runtime, pending.kind, ref, pending.payload))

    def track_task(self, rt: TrialRuntime, kind: CallKind, task: Any, payload: Payload) -> None:
        self.tracked.append(Tracked(rt, kind, task, payload))

    def request(self, rt: TrialRuntime, event: Event) -> None:
        self.requests.append((rt, event))

    notify = request

    def last(self, kind: CallKind) -> Tracked:
        return [t for t in self.tracked if t.kind is kind][-1]


@dataclass
class Setup:
    loop: Recorder
    executor: Executor
    fake: FakeRay
    storage: Path

    def add(self, make: MakeRuntime, **options: Any) -> TrialRuntime:
        rt = make(resources=CPU, **options)
        self.loop.trials[rt.id] = rt
        self.executor.known_keys(rt)
        return rt

    async def start(self, *trials: TrialRuntime) -> None:
        """Start their actors (one placement turn) and wait until they are set up; the
        tests send the train calls themselves (no first call behind the setup)."""
        for rt in trials:
            (start,) = [a for a in rt.machine.handle(Launch()) if isinstance(a, StartActor)]
            self.executor.execute(rt, dataclasses.replace(start, train=None))
        await until(lambda: all(rt.actor is not None for rt in trials))
        for rt in trials:
            ready = [t for t in self.loop.tracked if t.kind is CallKind.READY and t.runtime is rt]
            node_id, host = await ready[-1].answer()
            self.executor.follow_up(rt, Placed(node_id, host))

    def calls(self, rt: TrialRuntime) -> list[str]:
        return [c.method for c in self.fake.actor_of(rt.actor).calls]


@pytest.fixture
async def executor(tmp_path: Path, fake_ray: FakeRay) -> AsyncIterator[Any]:
    """``executor(mode=StorageMode.LOCAL, **RaySettings)`` builds a :class:`Setup`."""
    made: list[Executor] = []

    def make(mode: StorageMode = StorageMode.LOCAL, **settings: Any) -> Setup:
        storage = tmp_path / "storage"
        storage.mkdir(exist_ok=True)
        loop = Recorder()
        ray = RaySettings(str(storage), {}, mode, **settings)
        executor = Executor(loop, ray, CheckpointCollector(None), fake_ray)
        made.append(executor)
        return Setup(loop, executor, fake_ray, storage)

    yield make
    for executor in made:
        executor.close()
        await executor.retiring.finish()


# -- placement ------------------------------------------------------------------------


async def test_trials_starting_together_share_actors_sized_for_them(
    executor: Any, runtime: MakeRuntime
) -> None:
    s = executor(trials_per_worker=2)
    trials = [s.add(runtime) for _ in range(3)]
    await s.start(*trials)
    actors = s.fake.trial_actors()
    assert len(actors) == 2  # 3 trials, 2 per worker: spread as 2 + 1 in two actors
    assert sorted(a.options["num_cpus"] for a in actors) == [0.5, 1.0]
    assert trials[0].actor is trials[1].actor is not trials[2].actor
    for rt in trials:
        actor = s.fake.actor_of(rt.actor)
        assert rt.id in actor.trials and rt.host_name == "fakehost"
        assert rt.node_id == s.fake.node("node-1").node_id
        assert any(c.method == "setup" and c.args[:2] == (rt.id, 1) for c in actor.calls)


async def test_an_actor_waits_for_room_and_the_loop_does_not(
    executor: Any, runtime: MakeRuntime
) -> None:
    s = executor()
    rt = runtime(resources={"cpu": 8})  # more than the node has
    s.loop.trials[rt.id] = rt
    (start,) = [a for a in rt.machine.handle(Launch()) if isinstance(a, StartActor)]
    s.executor.execute(rt, start)
    await until(lambda: rt.actor is not None)
    ready = s.loop.last(CallKind.READY)
    await asyncio.sleep(0.1)
    assert not ready.ref.done() and rt.id in s.executor.waiting
    s.fake.add_node("node-2", {"CPU": 8.0})
    assert await ready.answer() == (s.fake.node("node-2").node_id, "fakehost")


# -- training ----------------------------------------------------------------------------


async def test_a_fresh_trial_s_first_call_is_sent_before_its_setup_answers(
    executor: Any, runtime: MakeRuntime
) -> None:
    """Issue 36: no round trip between a trial's setup and its first step. The first
    call goes to the actor right behind the setup, while the setup's answer is held."""
    s = executor()
    rt = s.add(runtime)
    held = s.fake.hold("setup", answer=True)
    (start,) = [a for a in rt.machine.handle(Launch()) if isinstance(a, StartActor)]
    s.executor.execute(rt, start)
    await until(lambda: rt.actor is not None)
    ready = s.loop.last(CallKind.READY)
    assert s.calls(rt) == ["setup", "train_many"]  # adaptive buffering's first call
    assert [r["count"] for r in await s.loop.last(CallKind.TRAIN).answer()][0] == 1
    assert not ready.ref.done()  # the step ran; its setup's answer is still held
    held.open()
    await ready.answer()


async def test_the_train_call_fits_the_step_count_and_the_host(
    executor: Any, runtime: MakeRuntime
) -> None:
    s = executor()
    rt = s.add(runtime)
    await s.start(rt)
    s.executor.execute(rt, Train(1))  # alone in its process: no arguments to send
    assert (await s.loop.last(CallKind.TRAIN).answer())["count"] == 1
    s.executor.execute(rt, Train(1, steps=3, slice_s=None))
    assert [r["count"] for r in await s.loop.last(CallKind.TRAIN).answer()] == [2, 3, 4]
    s.executor.execute(rt, Train(1, run_on=True))  # no decision on it: a method of its own
    assert (await s.loop.last(CallKind.TRAIN).answer())["count"] == 5  # a class: one step
    actor = s.fake.actor_of(rt.actor)
    calls = ["setup", "train_sole", "train_many", "train_sole_run_on"]
    assert [c.method for c in actor.calls] == calls
    assert actor.calls[2].args == (rt.id, 2, 3, None, False)
    assert actor.calls[3].args == ()

    shared = executor(trials_per_worker=2)
    a, b = shared.add(runtime), shared.add(runtime)
    await shared.start(a, b)
    shared.executor.execute(a, Train(1))  # the process hosts two: the call names its trial
    assert (await shared.loop.last(CallKind.TRAIN).answer())["count"] == 1
    assert shared.fake.actor_of(a.actor).calls[-1].args == (a.id, 1, False)


# -- saving -----------------------------------------------------------------------------


def manifest_at(storage: Path, key: str) -> dict[str, Any]:
    return dict(json.loads((storage / key / MANIFEST_NAME).read_text()))


async def test_a_small_local_checkpoint_is_committed_by_the_actor(
    executor: Any, runtime: MakeRuntime
) -> None:
    s = executor()
    rt = s.add(runtime)
    await s.start(rt)
    s.executor.execute(rt, Train(1))
    s.executor.execute(rt, Save(1, iteration=1))
    save = s.loop.last(CallKind.SAVE)
    assert (
        isinstance(save.payload, SavePayload) and save.payload.key == f"{rt.id}/checkpoint_000001"
    )
    manifest = await save.answer()
    assert manifest == manifest_at(s.storage, save.payload.key)
    assert json.loads((s.storage / save.payload.key / "state.json").read_text()) == {"count": 1}
    assert s.calls(rt)[-1] == "save_and_commit" and s.fake.persisters() == []


async def test_a_large_local_checkpoint_goes_to_the_nodes_uploader(
    executor: Any, runtime: MakeRuntime
) -> None:
    s = executor()
    rt = s.add(runtime, config={"padding_files": 9})
    await s.start(rt)
    s.executor.execute(rt, Save(1, iteration=0))
    save = s.loop.last(CallKind.SAVE)
    local_dir = await save.answer()
    assert isinstance(local_dir, str)  # too many files to commit in place
    pending = Pending(rt, CallKind.SAVE, 1, save.payload)
    s.executor.follow_up(rt, Upload(pending, local_dir))
    upload = s.loop.last(CallKind.SAVE)
    assert upload is not save and upload.payload is save.payload
    assert isinstance(save.payload, SavePayload)
    assert await upload.answer() == manifest_at(s.storage, save.payload.key)
    (persister,) = s.fake.persisters()
    assert [c.method for c in persister.calls] == ["ready", "persist"]


async def test_remote_saves_go_through_the_actor_until_the_uploader_is_up(
    executor: Any, runtime: MakeRuntime
) -> None:
    s = executor(StorageMode.REMOTE)
    rt = s.add(runtime)
    await s.start(rt)
    s.executor.execute(rt, Save(1, iteration=0))  # its node's persister is not up yet
    first = s.loop.last(CallKind.SAVE)
    assert s.calls(rt)[-1] == "save_and_persist"
    assert isinstance(first.payload, SavePayload)
    assert await first.answer() == manifest_at(s.storage, first.payload.key)
    assert rt.node_id is not None
    await until(lambda: s.executor.persisters.is_ready(rt.node_id or ""))
    s.executor.execute(rt, Train(1))
    s.executor.execute(rt, Save(1, iteration=1))
    second = s.loop.last(CallKind.SAVE)
    assert s.calls(rt)[-2:] == ["train_sole", "save"]  # the actor only writes it
    (persister,) = s.fake.persisters()
    assert persister.calls[-1].method == "persist"  # handed the save's ref
    assert isinstance(second.payload, SavePayload)
    assert await second.answer() == manifest_at(s.storage, second.payload.key)
    assert json.loads((s.storage / second.payload.key / "state.json").read_text()) == {"count": 1}


async def test_a_remote_save_names_the_checkpoints_it_follows(
    executor: Any, runtime: MakeRuntime
) -> None:
    """The uploader is told the trial's newest checkpoint and its timeline's origin (a
    PBT donor's): kept while the save runs, their blobs are neither uploaded again nor
    looked for on a content-addressed store."""
    s = executor(StorageMode.REMOTE)
    rt = s.add(runtime)
    await s.start(rt)
    own = Checkpoint(rt.id, 3, f"{rt.id}/checkpoint_000003", "uri")
    donor = Checkpoint("donor", 2, "donor/checkpoint_000002", "uri")
    rt.machine.checkpoints = [own]
    rt.machine.origin = donor
    s.executor.execute(rt, Save(1, iteration=4))
    (call,) = [c for c in s.fake.actor_of(rt.actor).calls if c.method == "save_and_persist"]
    assert call.args[-1] == (own.key, donor.key)
    await s.loop.last(CallKind.SAVE).answer()


async def test_a_save_never_takes_a_key_used_before(executor: Any, runtime: MakeRuntime) -> None:
    s = executor()
    rt = runtime(resources=CPU)
    rt.stored_keys = frozenset({f"{rt.id}/checkpoint_000002.1"})  # an abandoned run's
    s.loop.trials[rt.id] = rt
    s.executor.known_keys(rt)
    await s.start(rt)
    keys = []
    for _ in range(3):  # a rolled-back run saves iteration 2 again, and again
        s.executor.execute(rt, Save(1, iteration=2))
        save = s.loop.last(CallKind.SAVE)
        await save.answer()
        assert isinstance(save.payload, SavePayload)
        keys.append(save.payload.key.split("/")[-1])
    assert keys == ["checkpoint_000002", "checkpoint_000002.2", "checkpoint_000002.3"]


# -- restoring ---------------------------------------------------------------------------


async def saved(s: Setup, rt: TrialRuntime, steps: int) -> Checkpoint:
    """Train ``rt`` ``steps`` steps and commit a checkpoint; returns it."""
    for _ in range(steps):
        s.executor.execute(rt, Train(1))
        await s.loop.last(CallKind.TRAIN).answer()
    s.executor.execute(rt, Save(1, iteration=steps))
    save = s.loop.last(CallKind.SAVE)
    manifest = await save.answer()
    assert isinstance(save.payload, SavePayload)
    key = save.payload.key
    path = str(s.storage / key)
    return Checkpoint(rt.id, steps, key, "file://" + path, path, {}, manifest, rt.node_id)


async def test_a_restore_loads_the_checkpoint_into_a_new_actor(
    executor: Any, runtime: MakeRuntime
) -> None:
    s = executor()
    donor, rt = s.add(runtime), s.add(runtime)
    await s.start(donor, rt)
    ckpt = await saved(s, donor, 3)
    s.executor.execute(rt, Restore(1, ckpt))
    restore = s.loop.last(CallKind.RESTORE)
    assert restore.payload == RestorePayload(ckpt)
    assert await restore.answer() is None
    call = s.fake.actor_of(rt.actor).calls[-1]
    # Local storage the nodes may not share: the actor looks for it before loading.
    assert call.method == "restore" and call.args[2]["key"] == ckpt.key and call.args[4] is True
    s.executor.execute(rt, Train(1))
    assert (await s.loop.last(CallKind.TRAIN).answer())["count"] == 4


async def test_a_checkpoint_no_node_sees_is_streamed_from_one_that_does(
    executor: Any, runtime: MakeRuntime
) -> None:
    s = executor()
    s.fake.add_node("node-2", {"CPU": 4.0})
    donor, rt = s.add(runtime), s.add(runtime)
    await s.start(donor, rt)
    ckpt = await saved(s, donor, 2)
    seen_by: set[str] = set()
    s.fake.sees = lambda node_id, _: node_id in seen_by  # type: ignore[method-assign]
    node1, node2 = s.fake.node("node-1").node_id, s.fake.node("node-2").node_id
    s.executor.follow_up(rt, Stream(ckpt))
    stream = s.loop.last(CallKind.FETCH)
    with pytest.raises(CheckpointNotVisible, match="not visible from any live node"):
        await stream.answer()
    seen_by.add(node2)
    rt.node_id = node1
    s.executor.follow_up(rt, Stream(ckpt))
    stream = s.loop.last(CallKind.FETCH)
    await stream.answer()
    assert isinstance(stream.payload, FetchPayload)
    assert s.executor.fetches == 1 and s.fake.copies == 1
    staged = Path(stream.payload.staged)
    assert json.loads((staged / "state.json").read_text()) == {"count": 2}
    s.executor.follow_up(rt, LoadStreamed(ckpt, str(staged)))
    assert await s.loop.last(CallKind.RESTORE).answer() is None
    assert s.fake.actor_of(rt.actor).calls[-1].args[3] == str(staged)
    assert not staged.exists()  # the actor removes what it loaded
    s.executor.execute(rt, Train(1))
    assert (await s.loop.last(CallKind.TRAIN).answer())["count"] == 3


# -- stopping ----------------------------------------------------------------------------


async def test_a_graceful_stop_cleans_up_then_the_actor_goes(
    executor: Any, runtime: MakeRuntime
) -> None:
    s = executor()
    rt = s.add(runtime)
    await s.start(rt)
    actor = s.fake.actor_of(rt.actor)
    s.executor.execute(rt, StopActor(1))
    assert rt.actor is None and rt.host is None
    stop = s.loop.last(CallKind.STOP)
    assert stop.payload == StopPayload(actor.handle)  # kill it once it has shut down
    await stop.answer()
    assert [c.method for c in actor.calls] == ["setup", "stop", "shutdown"]
    assert actor.trials == []
    await until(lambda: actor.dead)  # once it has shut down, not at its grace's end


async def test_a_failed_trial_alone_in_its_process_is_killed_at_once(
    executor: Any, runtime: MakeRuntime
) -> None:
    s = executor()
    rt = s.add(runtime)
    await s.start(rt)
    actor = s.fake.actor_of(rt.actor)
    s.executor.execute(rt, StopActor(1, graceful=False))
    assert actor.dead and [c.method for c in actor.calls] == ["setup"]


async def test_a_trial_leaving_a_shared_process_leaves_the_others_running(
    executor: Any, runtime: MakeRuntime
) -> None:
    s = executor(trials_per_worker=3)
    a, b, c = (s.add(runtime) for _ in range(3))
    await s.start(a, b, c)
    actor = s.fake.actor_of(a.actor)
    s.executor.execute(a, StopActor(1, graceful=False))  # failed: forgotten, not asked
    s.executor.execute(b, StopActor(1))  # stopped: its cleanup runs, the process stays
    stop = s.loop.last(CallKind.STOP)
    assert isinstance(stop.payload, StopPayload) and stop.payload.host is c.host
    assert await stop.answer() is True  # clean: the process may host another trial
    assert [c.method for c in actor.calls][-2:] == ["drop", "stop"]
    assert actor.trials == [c.id] and not actor.dead
    s.executor.execute(c, Train(1))
    assert (await s.loop.last(CallKind.TRAIN).answer())["count"] == 1


async def test_a_stuck_actor_is_killed_with_every_trial_it_hosts(
    executor: Any, runtime: MakeRuntime
) -> None:
    s = executor(trials_per_worker=2)
    a, b = s.add(runtime), s.add(runtime)
    await s.start(a, b)
    host, actor = a.host, s.fake.actor_of(a.actor)
    gate = s.fake.hold("train", trial=a.id)
    s.executor.execute(a, Train(1))
    await gate.reached()
    s.executor.execute(b, Train(1))  # queued behind the stuck step
    s.executor.execute(a, StopActor(1, stuck=True))
    assert actor.dead and host is not None and not host.alive
    assert a.events[-1]["kind"] == "killed"
    with pytest.raises(Exception, match="actor died"):
        await s.loop.last(CallKind.TRAIN).answer()  # b's step fails: b recovers on its own


async def test_idle_actors_kept_for_reuse_go_once_shut_down_when_reuse_ends(
    executor: Any, runtime: MakeRuntime
) -> None:
    """An idle actor kept for reuse is shut down when reuse ends, and killed as soon as
    it has (not at its grace's end: its resources may be what a trial waits for)."""
    s = executor(stop_grace_s=60.0)
    s.executor.hosts.keep_idle = True
    rt = s.add(runtime)
    await s.start(rt)
    actor = s.fake.actor_of(rt.actor)
    s.executor.execute(rt, StopActor(1))
    await s.loop.last(CallKind.STOP).answer()
    assert not actor.dead  # kept for the next trial
    s.executor.retire_idle()
    assert actor.calls[-1].method == "shutdown"
    await until(lambda: actor.dead, timeout=10)


async def test_an_actor_whose_shutdown_hangs_is_killed_at_its_grace_end(
    executor: Any, runtime: MakeRuntime
) -> None:
    s = executor(stop_grace_s=0.3)
    s.executor.hosts.keep_idle = True
    rt = s.add(runtime)
    await s.start(rt)
    actor = s.fake.actor_of(rt.actor)
    s.executor.execute(rt, StopActor(1))
    await s.loop.last(CallKind.STOP).answer()
    s.fake.hold("shutdown")  # the trainable's cleanup never returns, say
    loop = asyncio.get_running_loop()
    retired = loop.time()
    s.executor.retire_idle()
    await asyncio.sleep(0.1)
    if loop.time() - retired < 0.25:  # surely before the grace's end (a loaded loop may not be)
        assert not actor.dead
    await until(lambda: actor.dead)  # at the grace's end


async def test_a_trial_stopped_before_its_setup_answered_hands_its_process_to_no_one(
    executor: Any, runtime: MakeRuntime
) -> None:
    """Its first call went behind the setup. A stop before the setup answered cancels
    that call if it has not started (here: the setup has not run yet), and lets the
    process clean up and go instead of keeping it for the next trial (whose setup would
    queue behind a first call already running)."""
    s = executor(stop_grace_s=60.0)
    s.executor.hosts.keep_idle = True
    rt = s.add(runtime)
    held = s.fake.hold("setup")
    (start,) = [a for a in rt.machine.handle(Launch()) if isinstance(a, StartActor)]
    s.executor.execute(rt, start)
    await until(lambda: rt.actor is not None)
    await held.reached()
    actor = s.fake.actor_of(rt.actor)
    first = s.loop.last(CallKind.TRAIN)
    s.executor.execute(rt, StopActor(1))
    assert s.executor.hosts.idle_hosts() == []
    held.open()
    with pytest.raises(TaskCancelledError):
        await first.answer()
    await until(lambda: actor.dead, timeout=10)
    assert [c.method for c in actor.calls] == ["setup", "train_many", "stop", "shutdown"]
