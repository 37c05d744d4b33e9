"""The executor: the state machine's actions, and the completions' follow-ups, turned
into Ray calls.

Everything that touches Ray on the driver's side of a trial is here: placing trials on
actors (the pool's plan, then creating and killing actors), the train call (one step,
a buffered batch, or the argument-free ``train_sole``), the three save routes (commit
in place for small local checkpoints, a node's persister, or the actor itself until
that persister is up), restores (looking for the checkpoint first with local storage),
streams from other nodes, and stopping. Each call's ObjectRef goes into the loop's
in-flight table (:meth:`Dispatcher.track`) with a typed payload; nothing here waits.
Ray is reached through a :class:`~orchestrator.engine.ray_calls.RayBackend` (Ray
itself unless a test passes its fake).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.actor.persister import PersisterPool
from orchestrator.actor.scratch import fetch_dir
from orchestrator.core.events import (
    Action,
    Failure,
    Restore,
    Save,
    StartActor,
    StopActor,
    Train,
)
from orchestrator.core.machine import TrialState
from orchestrator.core.placement import Host, HostPool, resource_key
from orchestrator.core.settings import StorageMode
from orchestrator.engine.collector import CheckpointCollector
from orchestrator.engine.outcomes import (
    CallKind,
    CheckBlobs,
    Collect,
    FetchPayload,
    FollowUp,
    HostDied,
    Kill,
    LoadStreamed,
    Payload,
    Pending,
    PersisterMaybeDied,
    Placed,
    RestorePayload,
    SavePayload,
    StartPersister,
    StopPayload,
    Stream,
    Unclean,
    Upload,
    WantSpare,
)
from orchestrator.engine.ray_calls import RAY, RayBackend, actor_options
from orchestrator.engine.retiring import Retiring
from orchestrator.engine.spares import Spares
from orchestrator.errors import CheckpointNotVisible, OrchestratorError, TrialError

if TYPE_CHECKING:
    from orchestrator.core.events import Event
    from orchestrator.engine.trial_runtime import TrialRuntime

log = logging.getLogger("orchestrator.engine.loop")

#: With ``trials_per_worker > 1``: how long trials about to start are gathered, so that
#: those failing together (their process died) are placed together.
PLACE_GATHER_S = 0.1


class Tracker(Protocol):
    """What the executor needs of the loop: its in-flight table and its inbox."""

    loop: asyncio.AbstractEventLoop | None

    @property
    def trials(self) -> Mapping[str, TrialRuntime]: ...

    def track(
        self, rt: TrialRuntime, kind: CallKind, ref: Any, payload: Payload = None
    ) -> None: ...

    def track_pending(self, pending: Pending, ref: Any) -> None: ...

    def track_pending_task(self, pending: Pending, task: asyncio.Task[Any]) -> None: ...

    def track_task(
        self, rt: TrialRuntime, kind: CallKind, task: asyncio.Task[Any], payload: Payload
    ) -> None: ...

    def request(self, rt: TrialRuntime, event: Event) -> None: ...

    def notify(self, rt: TrialRuntime, event: Event) -> None: ...


@dataclass(frozen=True)
class RaySettings:
    """How the executor runs trials on Ray: where checkpoints go (``storage_uri`` with
    ``storage_options``, in ``storage_mode``), the actors' ``runtime_env``, how many
    trials share a worker, how many warm spares to keep, how long an upload is retried
    while storage is down, and how long a stopping actor may take before it is killed."""

    storage_uri: str
    storage_options: Mapping[str, Any]
    storage_mode: StorageMode
    runtime_env: Mapping[str, Any] | None = None
    trials_per_worker: int = 1
    spare_actors: int = 1
    save_retry_for: float = 300.0
    stop_grace_s: float = 30.0


class Executor:
    """Carries out actions for the loop (see the module docstring)."""

    def __init__(
        self,
        dispatcher: Tracker,
        settings: RaySettings,
        collector: CheckpointCollector,
        backend: RayBackend = RAY,
    ) -> None:
        self._dispatcher = dispatcher
        self.backend = backend
        storage_uri, storage_options = settings.storage_uri, settings.storage_options
        runtime_env = settings.runtime_env
        self.hosts = HostPool(settings.trials_per_worker)
        self.spares = Spares(
            self.hosts, self.create_actor, self.trials, settings.spare_actors, backend
        )
        self.persisters = PersisterPool(
            storage_uri,
            storage_options,
            runtime_env,
            remote_class=backend.persister,
            kill=backend.kill,
        )
        self._storage_uri = storage_uri
        self._storage_options = dict(storage_options)
        self._mode = settings.storage_mode
        self._collector = collector
        self._save_retry_for = settings.save_retry_for
        self._runtime_env = dict(runtime_env) if runtime_env else None
        self.retiring = Retiring(settings.stop_grace_s, backend.kill)
        # Trials whose actor is to be started at the end of this loop turn, so that the
        # trials starting together can share actors (``trials_per_worker``).
        self._to_place: list[tuple[TrialRuntime, int, Train | None]] = []
        # Trials whose first train call went with their setup, until the setup is back
        # (that call's ref): a stop meanwhile cancels the call if it has not started,
        # and hands the process to no other trial (it may be running the trainable).
        self._first_unconfirmed: dict[str, Any] = {}
        self._keys: dict[str, set[str]] = {}
        self.fetches = 0
        self.waiting: dict[str, float] = {}  # trials whose actor is not ready: since when

    def known_keys(self, rt: TrialRuntime) -> None:
        """Remember the keys the trial used before (what its record and, after a
        resume, storage hold), so that a new save never takes one of them."""
        used = {c.key for c in rt.machine.checkpoints} | set(rt.stored_keys)
        if used:  # none: no set kept (a sweep's trials that never save, issue 36)
            self._keys.setdefault(rt.id, set()).update(used)

    @property
    def _loop(self) -> asyncio.AbstractEventLoop:
        loop = self._dispatcher.loop
        assert loop is not None
        return loop

    def execute(self, rt: TrialRuntime, action: Action) -> None:
        _ACTIONS[type(action)](self, rt, action)

    def follow_up(self, rt: TrialRuntime, item: FollowUp) -> None:
        _FOLLOW_UPS[type(item)](self, rt, item)

    # -- placement -------------------------------------------------------------------

    def _start_actor(self, rt: TrialRuntime, action: StartActor) -> None:
        if action.delay > 0:
            self._loop.call_later(
                action.delay, self._queue_placement, rt, action.generation, action.train
            )
        else:
            self._queue_placement(rt, action.generation, action.train)

    def _queue_placement(self, rt: TrialRuntime, generation: int, train: Train | None) -> None:
        if not self._to_place:
            if self.hosts.trials_per_worker > 1:
                # Trials whose shared process died fail one by one as Ray reports each
                # lost call; gathering them briefly lets them restart together, in one
                # new process rather than one each.
                self._loop.call_later(PLACE_GATHER_S, self._place_queued)
            else:
                self._loop.call_soon(self._place_queued)
        self._to_place.append((rt, generation, train))

    def _place_queued(self) -> None:
        """Start actors for the trials queued this turn, grouped by resources."""
        batch, self._to_place = self._to_place, []
        groups: dict[Any, list[TrialRuntime]] = {}
        first: dict[str, Train | None] = {}
        for rt, generation, train in batch:
            machine = rt.machine
            if machine.generation != generation or machine.state is not TrialState.STARTING:
                continue  # superseded while backing off or queued
            if rt.actor is not None:
                continue  # placed already (queued twice in one turn)
            groups.setdefault(resource_key(rt.spec.resources), []).append(rt)
            first[rt.id] = train
        for group in groups.values():
            resources = group[0].spec.resources
            plan = self.hosts.place([rt.id for rt in group], resources)
            for host in plan.spares_used:
                self.spares.note_taken(host, resources)
            broken: dict[int, Exception] = {}
            for host in plan.new:
                try:
                    self.hosts.created(host, self.create_actor(host))
                except Exception as err:  # Ray refused the options: those trials fail
                    self.hosts.failed(host)
                    broken[id(host)] = err
            for rt, host in zip(group, plan.hosts, strict=True):
                refused = broken.get(id(host))
                if refused is not None:
                    cause = TrialError(rt.id, f"could not create its actor: {refused}", refused)
                    self._dispatcher.request(rt, Failure(rt.machine.generation, cause))
                else:
                    self._setup_on(rt, host, first.get(rt.id))

    def trials(self) -> list[TrialRuntime]:
        return list(self._dispatcher.trials.values())

    def create_actor(self, host: Host) -> Any:
        options = actor_options({k: v * host.capacity for k, v in host.resources.items()})
        if self._runtime_env is not None:
            options["runtime_env"] = self._runtime_env
        remote = self.backend.trial_actor.options(**options)
        return remote.remote(self._storage_uri, self._storage_options)

    def _setup_on(self, rt: TrialRuntime, host: Host, train: Train | None = None) -> None:
        generation = rt.machine.generation
        rt.actor, rt.host = host.actor, host
        if not rt.code_loaded:  # a finished trial resumed without its code runs again
            try:
                load_code(rt)
            except OrchestratorError as err:
                cause = TrialError(rt.id, str(err).removeprefix(f"trial {rt.id}: "), err)
                self._dispatcher.request(rt, Failure(generation, cause, permanent=True))
                return
        rt.node_id = rt.host_name = None
        self.waiting[rt.id] = self._loop.time()
        from ray import cloudpickle

        payload = cloudpickle.dumps((rt.spec.trainable, rt.config, rt.spec.stop))
        # The checkpoint it will restore (a restart): downloaded beside its setup.
        target = rt.machine.restore_target
        prefetch = target.to_dict() if target is not None else None
        ref = host.actor.setup.remote(rt.id, generation, payload, prefetch)
        rt.seq = 1  # setup was call #0
        self._dispatcher.track(rt, CallKind.READY, ref)
        if train is not None:  # the first call, right behind the setup (see StartActor)
            self._first_unconfirmed[rt.id] = self._train(rt, train)

    # -- training and saving ------------------------------------------------------------

    def _train(self, rt: TrialRuntime, action: Train) -> Any:
        actor = rt.actor
        seq = rt.next_seq()
        if action.steps > 1:
            ref = actor.train_many.remote(rt.id, seq, action.steps, action.slice_s, action.run_on)
        elif rt.host is not None and rt.host.capacity == 1:
            ref = (actor.train_sole_run_on if action.run_on else actor.train_sole).remote()
        else:
            ref = actor.train.remote(rt.id, seq, action.run_on)
        self._dispatcher.track(rt, CallKind.TRAIN, ref)
        return ref

    def _save(self, rt: TrialRuntime, action: Save) -> None:
        actor = rt.actor
        key = self._allocate_key(rt, action.iteration)
        seq = rt.next_seq()
        assert rt.node_id is not None  # known since its actor was ready
        metrics = dict(rt.machine.last_metrics or {})
        payload = SavePayload(action.iteration, key, metrics, rt.node_id, rt.host_name)
        self._collector.refs.save_started(key)
        if self._mode.is_local:
            saved = actor.save_and_commit.remote(rt.id, seq, action.iteration, key)
            self._dispatcher.track(rt, CallKind.SAVE, saved, payload)
            return
        persister = self.persisters.for_node(rt.node_id)
        if self.persisters.is_ready(rt.node_id):
            saved = actor.save.remote(rt.id, seq, action.iteration)
            persisted = persister.persist.remote(
                saved, key, self._save_retry_for, rt.id, _follows(rt)
            )
        else:
            persisted = actor.save_and_persist.remote(
                rt.id, seq, action.iteration, key, self._save_retry_for, _follows(rt)
            )
        self._dispatcher.track(rt, CallKind.SAVE, persisted, payload)

    def _upload(self, rt: TrialRuntime, item: Upload) -> None:
        """A checkpoint its actor saved to scratch goes to its node's persister (which
        starts now if this is the node's first such checkpoint); the trial trains on."""
        payload = item.save.payload
        assert isinstance(payload, SavePayload)
        persister = self.persisters.for_node(payload.node_id)
        ref = persister.persist.remote(
            item.local_dir, payload.key, self._save_retry_for, rt.id, _follows(rt)
        )
        self._dispatcher.track_pending(
            Pending(rt, CallKind.SAVE, item.save.generation, payload), ref
        )

    def _allocate_key(self, rt: TrialRuntime, iteration: int) -> str:
        """A key never used before by this trial: a rolled-back run may save the same
        iteration again, and overwriting a committed checkpoint would not be atomic."""
        used = self._keys.setdefault(rt.id, set())
        key = f"{rt.id}/checkpoint_{iteration:06d}"
        n = 1
        while key in used:
            key = f"{rt.id}/checkpoint_{iteration:06d}.{n}"
            n += 1
        used.add(key)
        return key

    # -- restoring ------------------------------------------------------------------------

    def _restore(self, rt: TrialRuntime, action: Restore) -> None:
        ckpt = action.checkpoint
        skipped = [c.uri for c in rt.machine.checkpoints if c.key in rt.machine.bad_checkpoints]
        if skipped:
            log.warning(
                "trial %s: restoring %s instead of the newer checkpoint(s) that could not be "
                "loaded: %s",
                rt.id,
                ckpt.uri,
                ", ".join(skipped),
            )
        if action.config is not None:
            rt.set_config(action.config)
            rt.note("exploit", ckpt.iteration, donor_id=ckpt.trial_id)
        # Local storage the nodes may not share: the actor loads the checkpoint only if
        # it sees it, and says so otherwise (then it is streamed from a node that does).
        look_first = self._mode is StorageMode.LOCAL and ckpt.path is not None
        self._submit_restore(rt, ckpt, None, look_first=look_first)

    def _submit_restore(
        self, rt: TrialRuntime, ckpt: Any, local_dir: str | None, *, look_first: bool = False
    ) -> None:
        config = rt.machine.restore_config
        ref = rt.actor.restore.remote(
            rt.id, rt.next_seq(), ckpt.to_dict(), local_dir, look_first, config
        )
        self._dispatcher.track(rt, CallKind.RESTORE, ref, RestorePayload(ckpt))

    def _stream(self, rt: TrialRuntime, item: Stream) -> None:
        staged = fetch_dir(rt.id, rt.machine.generation)
        coro = self._stream_from_where_visible(item.checkpoint, rt.node_id, staged)
        task = asyncio.ensure_future(coro)
        self._dispatcher.track_task(rt, CallKind.FETCH, task, FetchPayload(item.checkpoint, staged))

    async def _stream_from_where_visible(self, ckpt: Any, target: str | None, staged: str) -> None:
        assert ckpt.path is not None and target is not None
        source = await self.backend.find_visible(ckpt, target)
        if source is None:
            raise CheckpointNotVisible(
                f"{ckpt.uri} is not visible from any live node (it was saved on host "
                f"{ckpt.host or 'unknown'}, node {ckpt.node_id or 'unknown'})"
            )
        self.fetches += 1
        await self.backend.copy_dir(source, ckpt, target, staged)

    def _load_streamed(self, rt: TrialRuntime, item: LoadStreamed) -> None:
        self._submit_restore(rt, item.checkpoint, item.staged)

    # -- stopping ---------------------------------------------------------------------

    def _stop_actor(self, rt: TrialRuntime, action: StopActor) -> None:
        actor, host = rt.actor, rt.host
        rt.actor = rt.host = None
        self.waiting.pop(rt.id, None)
        first = self._first_unconfirmed.pop(rt.id, None)
        if first is not None:
            self.backend.cancel(first)
        if actor is None or host is None:
            return
        reusable = action.graceful and first is None
        last = self.hosts.leave(host, rt.id, reusable=reusable)
        if action.stuck:
            # Its call never returned: nothing queued behind it would ever run, so the
            # process goes now (failing any other trial it hosts, which recovers).
            log.warning(
                "trial %s: its actor did not answer within its grace period after a "
                "stop or pause (a step, restore or save that does not return); killed it",
                rt.id,
            )
            rt.note("killed", rt.machine.iteration)
            self.hosts.mark_dead(host)
            self.backend.kill(actor)
            return
        if not action.graceful:
            if last:
                self.backend.kill(actor)
            else:  # the other trials it hosts carry on
                actor.drop.remote(rt.id, action.generation)
            return
        stopped = actor.stop.remote(rt.id, rt.next_seq())
        if not last:
            self._dispatcher.track(rt, CallKind.STOP, stopped, StopPayload(host=host))
            return
        shutdown = actor.shutdown.remote(stopped)
        self._dispatcher.track(rt, CallKind.STOP, shutdown, StopPayload(actor))
        self.retiring.add(actor, shutdown)

    async def warm_workers(self, resources: Mapping[str, float], count: int) -> int:
        """Start up to ``count`` actors of shape ``resources`` for trials about to come
        (see ``spares.py``); how many it started. Only for one trial per worker: packed
        hosts are sized by the trials that start together."""
        if self.hosts.trials_per_worker > 1 or not self.hosts.keep_idle:
            return 0
        return await self.spares.warm(resources, count)

    def retire_idle(self) -> None:
        """Kill the actors of idle hosts that no trial took (actor reuse is over)."""
        for host in self.hosts.take_idle():
            if host.actor is not None:
                self.retiring.add(host.actor, host.actor.shutdown.remote())

    def close(self) -> None:
        self.persisters.close(self.retiring.add)

    # -- follow-ups -----------------------------------------------------------------------

    def _kill(self, rt: TrialRuntime, item: Kill) -> None:
        self.retiring.kill(item.actor)

    def _collect(self, rt: TrialRuntime, item: Collect) -> None:
        self._collector.submit((item.checkpoint,))

    def _check_blobs(self, rt: TrialRuntime, item: CheckBlobs) -> None:
        payload = item.save.payload
        assert isinstance(payload, SavePayload)
        check = self._collector.check_save(payload.key, item.manifest, item.suspects)
        self._dispatcher.track_pending_task(item.save, asyncio.ensure_future(check))

    def _unclean(self, rt: TrialRuntime, item: Unclean) -> None:
        host = item.host
        self.hosts.mark_dead(host)
        if not host.members and host.actor is not None:
            self.backend.kill(host.actor)

    def _host_died(self, rt: TrialRuntime, item: HostDied) -> None:
        if rt.host is not None:
            self.hosts.mark_dead(rt.host)

    def _persister_maybe_died(self, rt: TrialRuntime, item: PersisterMaybeDied) -> None:
        if self.persisters.forget_if_died(item.error):
            log.warning("trial %s: the checkpoint uploader of its node died", rt.id)

    def _want_spare(self, rt: TrialRuntime, item: WantSpare) -> None:
        self.spares.consider(item.resources)

    def _placed(self, rt: TrialRuntime, item: Placed) -> None:
        rt.node_id, rt.host_name = item.node_id, item.host
        self._first_unconfirmed.pop(rt.id, None)

    def _start_persister(self, rt: TrialRuntime, item: StartPersister) -> None:
        self.persisters.for_node(item.node_id)  # starts with the trial, not at its save


_ACTIONS: dict[type[Action], Callable[[Executor, TrialRuntime, Any], None]] = {
    StartActor: Executor._start_actor,
    Train: Executor._train,
    Save: Executor._save,
    Restore: Executor._restore,
    StopActor: Executor._stop_actor,
}

_FOLLOW_UPS: dict[type[Any], Callable[[Executor, TrialRuntime, Any], None]] = {
    Placed: Executor._placed,
    Upload: Executor._upload,
    Stream: Executor._stream,
    LoadStreamed: Executor._load_streamed,
    Kill: Executor._kill,
    Collect: Executor._collect,
    CheckBlobs: Executor._check_blobs,
    HostDied: Executor._host_died,
    Unclean: Executor._unclean,
    PersisterMaybeDied: Executor._persister_maybe_died,
    StartPersister: Executor._start_persister,
    WantSpare: Executor._want_spare,
}


def load_code(rt: TrialRuntime) -> None:
    """Load a trial's code that a resume left unloaded (it did not need to run); its
    policy stays as built (see ``TrialSpec.with_code``)."""
    spec = rt.spec.with_code()
    rt.spec = spec
    if rt.config_pickle is None:
        rt.config = dict(spec.config)
    rt.code_loaded = True


def _follows(rt: TrialRuntime) -> tuple[str, ...]:
    """The checkpoints a save of ``rt`` follows, which the driver keeps while it is
    under way (the trial's newest, and the origin its timeline starts from): blobs
    they name are not uploaded again nor looked for (content-addressed storage)."""
    machine = rt.machine
    keys = [c.key for c in (machine.latest_checkpoint, machine.origin) if c is not None]
    return tuple(dict.fromkeys(keys))
