"""The dispatcher: one asyncio loop that drives every trial.

Every piece of work on an actor (start, train, save, restore, stop) is an ``ObjectRef``
in one table of in-flight work, each entry naming its trial, kind and actor generation.
Ray resolves the refs on its own threads; a completion is handed to the asyncio loop
(``call_soon_threadsafe``), queued, and turned into an event for the trial's state
machine, whose actions the loop then carries out. Nothing here calls ``ray.get`` or
waits on one trial: a trial whose actor waits minutes for a node simply has a ref that
has not completed yet. The cost per completion is O(1), whatever the number of trials.

Saves are pipelined: ``save`` writes into node-local scratch, the node's persister
(given the save's ref, so Ray starts it exactly when the save is written) uploads it,
and the next train step is submitted at once. With local storage a small checkpoint
is committed by the trial's actor itself as part of the save (about a millisecond:
cheaper than any hand-off), and only larger ones go to the persister.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import functools
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import (
    ActorDiedError,
    ActorUnavailableError,
    NodeDiedError,
    ObjectLostError,
    OwnerDiedError,
    RayActorError,
    RayTaskError,
    WorkerCrashedError,
)

from storage import StorageError

from .checkpoints import Checkpoint
from .collector import CheckpointCollector
from .errors import (
    CheckpointNotVisible,
    InvalidTransition,
    OrchestratorError,
    TrainableUnavailable,
    TrialError,
)
from .hooks import HookRunner
from .hosts import Host, HostPool, resource_key
from .journal import Journal
from .lifecycle import (
    Action,
    ActorReady,
    CheckpointUnavailable,
    DeleteCheckpoints,
    Event,
    Failure,
    Launch,
    Notify,
    RecordCheckpoint,
    Report,
    Restore,
    RestoreDone,
    Rollback,
    Save,
    SaveDone,
    SaveFailed,
    StartActor,
    StopActor,
    Train,
    TrainResult,
)
from .persist import PersisterPool
from .results import ResultWarnings, clean_result
from .trainable import NOT_VISIBLE, RemoteTrialActor, fetch_dir
from .trial import Trial

log = logging.getLogger("orchestrator.loop")

_LOST = (
    RayActorError,
    ActorDiedError,
    ActorUnavailableError,
    NodeDiedError,
    ObjectLostError,
    OwnerDiedError,
    WorkerCrashedError,
)

#: Seconds a stopping actor gets to run its cleanup before it is killed.
STOP_GRACE_S = 10.0
#: With ``trials_per_worker > 1``: how long trials about to start are gathered, so that
#: those failing together (their process died) are placed together.
PLACE_GATHER_S = 0.1
#: A trial whose actor has waited this long for resources that no node of the cluster
#: has in total gets a warning, repeated every ``UNPLACEABLE_REPEAT_S``.
UNPLACEABLE_AFTER_S = 3.0
UNPLACEABLE_REPEAT_S = 60.0


class Kind(enum.Enum):
    READY = "setup"
    TRAIN = "step"
    SAVE = "save"
    RESTORE = "restore"
    FETCH = "fetch"  # streaming a node-local checkpoint to the restoring actor's node
    STOP = "stop"


@dataclass(eq=False)
class Pending:
    """One entry of the in-flight table."""

    trial: Trial
    kind: Kind
    generation: int
    extra: Any = None


@dataclass(frozen=True)
class LoopStatistics:
    events: int
    results: int
    in_flight: int
    in_flight_by_kind: Mapping[str, int] = field(default_factory=dict)
    fetches: int = 0  # node-local checkpoints streamed to another node for a restore


class Dispatcher:
    def __init__(
        self,
        *,
        storage_uri: str,
        storage_options: Mapping[str, Any],
        uri_for: Callable[[str], str],
        local_path_for: Callable[[str], str | None],
        hooks: HookRunner,
        collector: CheckpointCollector,
        save_retry_for: float = 300.0,
        journal: Journal | None = None,
        runtime_env: Mapping[str, Any] | None = None,
        node_local: bool = False,
        local_storage: bool = False,
        trials_per_worker: int = 1,
    ) -> None:
        self._hosts = HostPool(trials_per_worker, self._create_actor)
        self._persisters = PersisterPool(storage_uri, storage_options, runtime_env)
        # Trials whose actor is to be started at the end of this loop turn, so that the
        # trials starting together can share actors (``trials_per_worker``).
        self._to_place: list[tuple[Trial, int]] = []
        self._runtime_env = dict(runtime_env) if runtime_env else None
        # Local storage the nodes may not share: a checkpoint is wherever a disk holds
        # it; a restore looks for it (orchestrator.locality) and streams it if need be.
        self._node_local = node_local
        # Storage is a local directory: actors commit their small checkpoints themselves,
        # and a node's persister starts only when a larger one needs it.
        self._local_storage = local_storage
        self._fetches = 0
        self._save_retry_for = save_retry_for
        self._journal = journal
        self._storage_uri = storage_uri
        self._storage_options = dict(storage_options)
        self._uri_for = uri_for
        self._local_path_for = local_path_for
        self._hooks = hooks
        self._collector = collector
        self._trials: dict[str, Trial] = {}
        self._unsettled: set[str] = set()
        self._launch_queued: set[str] = set()  # trials with a Launch not yet handled
        self._settled = asyncio.Event()
        self._settled.set()
        self._in_flight: set[Pending] = set()
        self._inbox: collections.deque[
            tuple[Trial, Event] | tuple[Pending, Future[Any] | asyncio.Future[Any]]
        ]
        self._inbox = collections.deque()
        # Completions from Ray's threads, waiting for the loop to drain them.
        self._from_ray_queue: collections.deque[tuple[Pending, Future[Any]]] = collections.deque()
        self._drain_scheduled = False
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._keys: dict[str, set[str]] = {}
        self._events = 0
        self._results = 0
        self._result_warnings = ResultWarnings()
        self._empty_checkpoints_said: set[str] = set()
        # Trials whose actor was asked for and is not ready yet: since when, and when
        # they were last warned about resources no node has.
        self._waiting: dict[str, float] = {}
        self._warned_unplaceable: dict[str, float] = {}
        self.running = False

    # -- lifetime ----------------------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.running = True
        self._task = self._loop.create_task(self._serve(), name="orchestrator-loop")
        self._loop.call_later(UNPLACEABLE_AFTER_S, self._check_waiting)

    async def aclose(self) -> None:
        """Stop every live actor and the loop. Trials keep their state and history."""
        for trial in self._trials.values():
            if trial._actor is not None:
                _kill(trial._actor)
                trial._actor = trial._host = None
        self._persisters.close()
        self.running = False
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        for trial in self._trials.values():
            trial._fail_waiters(
                TrialError(trial.id, "the orchestrator closed before the request completed")
            )

    @property
    def failed(self) -> BaseException | None:
        """The loop's own crash (a bug), if it crashed."""
        if self._task is not None and self._task.done() and not self._task.cancelled():
            return self._task.exception()
        return None

    # -- trials ------------------------------------------------------------------------

    def attach(self, trial: Trial) -> None:
        self._trials[trial.id] = trial
        trial._dispatcher = self
        self._keys.setdefault(trial.id, {c.key for c in trial.checkpoints})
        if self._journal is not None:
            self._journal.track(trial, trial._spec)

    def launch(self, trial: Trial) -> None:
        """Start a PENDING trial; a trial whose start is already queued is left as is
        (``add_trial`` during one ``run()`` and the next ``run()`` may both ask)."""
        if trial.id in self._launch_queued:
            return
        self._launch_queued.add(trial.id)
        self.request(trial, Launch())

    def request(self, trial: Trial, event: Event) -> None:
        """Queue ``event`` for ``trial``; the loop handles it in order with all others."""
        self._unsettled.add(trial.id)
        self._settled.clear()
        self._inbox.append((trial, event))
        self._wake.set()

    async def wait_settled(self) -> None:
        """Return once every trial is TERMINATED, ERROR or PAUSED with nothing queued."""
        while True:
            if self._task is None:
                raise OrchestratorError("the orchestrator closed while run() was waiting")
            waiter = asyncio.ensure_future(self._settled.wait())
            done, _ = await asyncio.wait({waiter, self._task}, return_when=asyncio.FIRST_COMPLETED)
            if self._task in done:
                waiter.cancel()
                self._task.result()  # re-raise the loop's crash
                raise RuntimeError("the orchestrator loop ended unexpectedly")
            if self.settled_now():
                return

    def settled_now(self) -> bool:
        return not self._inbox and not self._unsettled

    def is_pinned(self, key: str) -> bool:
        return any(key in t._machine.pinned for t in self._trials.values())

    def statistics(self) -> LoopStatistics:
        by_kind: dict[str, int] = collections.Counter(p.kind.value for p in self._in_flight)
        return LoopStatistics(
            self._events, self._results, len(self._in_flight), dict(by_kind), self._fetches
        )

    # -- the loop ----------------------------------------------------------------------

    async def _serve(self) -> None:
        inbox = self._inbox
        while True:
            if not inbox:
                self._wake.clear()
                await self._wake.wait()
            while inbox:
                item = inbox.popleft()
                head, tail = item
                if isinstance(head, Pending):
                    event = self._event_from(head, tail)  # type: ignore[arg-type]
                    if event is not None:
                        self._dispatch(head.trial, event)
                else:
                    self._dispatch(head, tail)  # type: ignore[arg-type]

    def _dispatch(self, trial: Trial, event: Event) -> None:
        self._events += 1
        if type(event) is Launch:
            self._launch_queued.discard(trial.id)
        before = trial._machine.state
        try:
            actions = trial._machine.handle(event)
        except InvalidTransition:
            log.exception("trial %s: dropped an event the machine refused", trial.id)
            actions = []
        for action in actions:
            try:
                self._execute(trial, action)
            except Exception as err:  # submitting to Ray failed: that is a trial failure
                log.exception("trial %s: could not carry out %s", trial.id, action)
                gen = trial._machine.generation
                cause = TrialError(trial.id, f"could not {type(action).__name__}: {err}", err)
                cause.__cause__ = err
                self._inbox.append((trial, Failure(gen, cause, actor_died=True)))
                self._wake.set()
                break
        trial._wake_waiters()
        self._note_settled(trial)
        if self._journal is not None:
            if trial.state is not before and trial.state.is_settled:
                self._journal.urgent()  # a driver killed now must not run it again
            else:
                self._journal.touch()

    def _note_settled(self, trial: Trial) -> None:
        if trial.state.is_settled:
            self._unsettled.discard(trial.id)
            if not self._unsettled:
                self._settled.set()
        else:
            self._unsettled.add(trial.id)
            self._settled.clear()

    # -- completions -------------------------------------------------------------------

    def _track(self, trial: Trial, kind: Kind, ref: Any, extra: Any = None) -> None:
        self._track_pending(Pending(trial, kind, trial._machine.generation, extra), ref)

    def _track_pending(self, pending: Pending, ref: Any) -> None:
        self._in_flight.add(pending)
        ref.future().add_done_callback(functools.partial(self._from_ray, pending))

    def _track_task(self, trial: Trial, kind: Kind, task: asyncio.Task[Any], extra: Any) -> None:
        pending = Pending(trial, kind, trial._machine.generation, extra)
        self._in_flight.add(pending)
        task.add_done_callback(functools.partial(self._completed, pending))

    def _from_ray(self, pending: Pending, future: Future[Any]) -> None:
        # Runs on a Ray thread: hand over to the asyncio loop, nothing else. One wake-up
        # carries every completion that arrives before the loop gets to it (at 1,000s of
        # results per second, a wake-up per completion costs a syscall and a GIL hand-off
        # each). The append must come before the flag is read: a drain that already
        # cleared the flag then either sees this completion or is followed by another.
        self._from_ray_queue.append((pending, future))
        if self._drain_scheduled:
            return
        self._drain_scheduled = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._drain_from_ray)
            except RuntimeError:  # the loop closed meanwhile
                pass

    def _drain_from_ray(self) -> None:
        self._drain_scheduled = False
        queue = self._from_ray_queue
        while queue:
            self._completed(*queue.popleft())

    def _completed(self, pending: Pending, future: Future[Any] | asyncio.Future[Any]) -> None:
        self._in_flight.discard(pending)
        self._inbox.append((pending, future))
        self._wake.set()

    def _event_from(
        self, pending: Pending, future: Future[Any] | asyncio.Future[Any]
    ) -> Event | None:
        trial, gen = pending.trial, pending.generation
        try:
            value = future.result()
        except BaseException as err:  # noqa: BLE001 - every failure becomes an event
            if pending.kind is Kind.STOP:
                if pending.extra is not None:
                    _kill(pending.extra)
                return None
            if pending.kind is Kind.FETCH:
                ckpt = pending.extra[0]
                log.warning(
                    "trial %s: could not stream %s to its node: %s", trial.id, ckpt.uri, err
                )
                return CheckpointUnavailable(gen, ckpt, err)
            if pending.kind is Kind.SAVE and self._persisters.forget_if_died(err):
                log.warning("trial %s: the checkpoint uploader of its node died", trial.id)
            error = self._trial_error(pending, err)
            if pending.kind is Kind.SAVE and isinstance(error.cause, StorageError):
                iteration = pending.extra[0]
                return SaveFailed(gen, iteration, error)
            died = _is_lost(err)
            if died and gen == trial._machine.generation and trial._host is not None:
                self._hosts.mark_dead(trial._host)  # its other trials must not rejoin it
            if isinstance(error.cause, TrainableUnavailable):
                cause = TrialError(trial.id, str(error.cause), error.cause)
                return Failure(gen, cause, permanent=True)
            return Failure(gen, error, actor_died=died)
        kind = pending.kind
        if kind is Kind.TRAIN:
            results = tuple(value) if isinstance(value, list) else (value,)
            self._results += len(results)
            return TrainResult(gen, results)
        if kind is Kind.READY:
            self._waiting.pop(trial.id, None)
            trial.node_id, trial.host = value
            if trial._machine.policy.checkpoint_every > 0 and not self._local_storage:
                self._persisters.for_node(trial.node_id)  # starts with the trial, not at its save
            return ActorReady(gen)
        if kind is Kind.SAVE:
            iteration, key, metrics, node_id, host = pending.extra
            if isinstance(value, str):  # saved to scratch, too big to commit in place
                self._upload(pending, value)
                return None
            ckpt = Checkpoint(
                trial_id=trial.id,
                iteration=iteration,
                key=key,
                uri=self._uri_for(key),
                path=self._local_path_for(key),
                metrics=metrics,
                manifest=value,
                node_id=node_id,
                host=host,
            )
            if gen != trial._machine.generation:
                # Committed after its actor was given up: nobody will ever list it.
                self._collector.submit((ckpt,))
                return None
            if not value.get("files") and trial.id not in self._empty_checkpoints_said:
                self._empty_checkpoints_said.add(trial.id)
                log.warning(
                    "trial %s: save_checkpoint() wrote nothing into its directory: the "
                    "checkpoint at iteration %d is empty, and a restore from it starts "
                    "from nothing. Write the trainable's state into checkpoint_dir",
                    trial.id,
                    iteration,
                )
            return SaveDone(gen, ckpt)
        if kind is Kind.RESTORE:
            if value == NOT_VISIBLE:  # not on this node's disk: stream it from one that sees it
                self._fetch(trial, pending.extra)
                return None
            return RestoreDone(gen, pending.extra)
        if kind is Kind.FETCH:
            ckpt, staged = pending.extra
            if trial._machine.generation == gen and trial._actor is not None:
                self._submit_restore(trial, ckpt, staged)
            return None
        # Kind.STOP: the trial cleaned up; an actor it was the last trial of must go.
        if pending.extra is not None:
            _kill(pending.extra)
        return None

    # -- resources no node has -----------------------------------------------------------

    def _check_waiting(self) -> None:
        """Every few seconds: warn about trials waiting for more than any node has."""
        if not self.running or self._loop is None:
            return
        now = self._loop.time()
        due = []
        for trial_id, since in list(self._waiting.items()):
            trial = self._trials.get(trial_id)
            if trial is None or trial.state.value != "STARTING" or trial._host is None:
                del self._waiting[trial_id]
                continue
            last = self._warned_unplaceable.get(trial_id, -UNPLACEABLE_REPEAT_S)
            if now - since >= UNPLACEABLE_AFTER_S and now - last >= UNPLACEABLE_REPEAT_S:
                due.append(trial)
        if due:
            task = self._loop.create_task(self._warn_unplaceable(due))
            task.add_done_callback(_log_crash)
        self._loop.call_later(UNPLACEABLE_AFTER_S, self._check_waiting)

    async def _warn_unplaceable(self, trials: list[Trial]) -> None:
        nodes = await asyncio.to_thread(ray.nodes)
        totals = [dict(n.get("Resources") or {}) for n in nodes if n.get("Alive")]
        assert self._loop is not None
        for trial in trials:
            demand = _ray_demand(trial.resources, trial._host.capacity if trial._host else 1)
            if any(all(node.get(k, 0.0) >= v for k, v in demand.items()) for node in totals):
                continue  # it fits a node: it waits its turn, as it should
            self._warned_unplaceable[trial.id] = self._loop.time()
            largest = max(totals, key=lambda n: n.get("CPU", 0.0), default={})
            shown = {k: v for k, v in largest.items() if not k.startswith("node:")}
            log.warning(
                "trial %s asks for %s, but no node of the Ray cluster has that much (the "
                "largest: %s); it waits until a node that can hold it joins. Ignore this if "
                "the cluster is autoscaling; otherwise ask for less",
                trial.id,
                _shown(demand),
                _shown(shown),
            )

    def _trial_error(self, pending: Pending, err: BaseException) -> TrialError:
        trial = pending.trial
        what = {
            Kind.READY: f"{trial.trainable_cls.__name__}.setup() or actor start-up",
            Kind.TRAIN: f"{trial.trainable_cls.__name__}.step()",
            Kind.SAVE: f"{trial.trainable_cls.__name__}.save_checkpoint() or its upload",
            Kind.RESTORE: f"{trial.trainable_cls.__name__}.load_checkpoint() or its download",
        }.get(pending.kind, pending.kind.value)
        if _is_lost(err):
            message = f"its actor or node died during {what}: {_first_line(err)}"
            cause: BaseException = err
        else:
            cause = getattr(err, "cause", None) or err if isinstance(err, RayTaskError) else err
            message = f"{what} raised {type(cause).__name__}: {_first_line(cause)}"
        error = TrialError(trial.id, message, cause)
        error.__cause__ = err
        return error

    # -- actions -----------------------------------------------------------------------

    def _execute(self, trial: Trial, action: Action) -> None:
        handler = _EXECUTORS[type(action)]
        handler(self, trial, action)

    def _next_seq(self, trial: Trial) -> int:
        seq = trial._seq
        trial._seq += 1
        return seq

    def _start_actor(self, trial: Trial, action: StartActor) -> None:
        if action.delay > 0:
            assert self._loop is not None
            self._loop.call_later(action.delay, self._start_actor_now, trial, action.generation)
        else:
            self._start_actor_now(trial, action.generation)

    def _start_actor_now(self, trial: Trial, generation: int) -> None:
        if not self._to_place:
            assert self._loop is not None
            if self._hosts.trials_per_worker > 1:
                # Trials whose shared process died fail one by one as Ray reports each
                # lost call; gathering them briefly lets them restart together, in one
                # new process rather than one each.
                self._loop.call_later(PLACE_GATHER_S, self._place_trials)
            else:
                self._loop.call_soon(self._place_trials)
        self._to_place.append((trial, generation))

    def _place_trials(self) -> None:
        """Start actors for the trials queued this turn, grouped by resources."""
        batch, self._to_place = self._to_place, []
        groups: dict[Any, list[Trial]] = {}
        for trial, generation in batch:
            machine = trial._machine
            if machine.generation != generation or machine.state.value != "STARTING":
                continue  # superseded while backing off or queued
            if trial._actor is not None:
                continue  # placed already (queued twice in one turn)
            groups.setdefault(resource_key(trial.resources), []).append(trial)
        for trials in groups.values():
            try:
                hosts = self._hosts.place([t.id for t in trials], trials[0].resources)
            except Exception as err:
                for trial in trials:
                    cause = TrialError(trial.id, f"could not create its actor: {err}", err)
                    self.request(trial, Failure(trial._machine.generation, cause, actor_died=False))
                continue
            for trial, host in zip(trials, hosts, strict=True):
                self._setup_on(trial, host)

    def _create_actor(self, resources: Mapping[str, float], trials: int) -> Any:
        options = _actor_options({k: v * trials for k, v in resources.items()})
        if self._runtime_env is not None:
            options["runtime_env"] = self._runtime_env
        return RemoteTrialActor.options(**options).remote(self._storage_uri, self._storage_options)

    def _setup_on(self, trial: Trial, host: Host) -> None:
        generation = trial._machine.generation
        trial._actor = host.actor
        trial._host = host
        if trial._trainable_loader is not None:  # a finished trial started again
            try:
                trial._load_code()
            except OrchestratorError as err:
                cause = TrialError(trial.id, str(err).removeprefix(f"trial {trial.id}: "), err)
                self.request(trial, Failure(generation, cause, permanent=True))
                return
        trial.node_id = trial.host = None
        assert self._loop is not None
        self._waiting[trial.id] = self._loop.time()
        from ray import cloudpickle

        payload = cloudpickle.dumps((trial.trainable_cls, trial.config, trial.stop_condition))
        ref = host.actor.setup.remote(trial.id, generation, payload)
        trial._seq = 1  # setup was call #0
        self._track(trial, Kind.READY, ref)

    def _train(self, trial: Trial, action: Train) -> None:
        actor = trial._actor
        seq = self._next_seq(trial)
        if action.steps > 1:
            ref = actor.train_many.remote(trial.id, seq, action.steps)
        elif trial._host.capacity == 1:
            ref = actor.train_sole.remote()
        else:
            ref = actor.train.remote(trial.id, seq)
        self._track(trial, Kind.TRAIN, ref)

    def _save(self, trial: Trial, action: Save) -> None:
        actor = trial._actor
        key = self._allocate_key(trial, action.iteration)
        seq = self._next_seq(trial)
        assert trial.node_id is not None  # known since its actor was ready
        metrics = dict(trial._machine.last_metrics or {})
        extra = (action.iteration, key, metrics, trial.node_id, trial.host)
        if self._local_storage:
            saved = actor.save_and_commit.remote(trial.id, seq, action.iteration, key)
            self._track(trial, Kind.SAVE, saved, extra)
            return
        persister = self._persisters.for_node(trial.node_id)
        if self._persisters.is_ready(trial.node_id):
            saved = actor.save.remote(trial.id, seq, action.iteration)
            persisted = persister.persist.remote(saved, key, self._save_retry_for, trial.id)
        else:
            persisted = actor.save_and_persist.remote(
                trial.id, seq, action.iteration, key, self._save_retry_for
            )
        self._track(trial, Kind.SAVE, persisted, extra)

    def _upload(self, save: Pending, local_dir: str) -> None:
        """Hand a checkpoint its actor saved to scratch to its node's persister (which
        starts now if this is the node's first such checkpoint); the trial trains on."""
        _iteration, key, _metrics, node_id, _host = save.extra
        persister = self._persisters.for_node(node_id)
        ref = persister.persist.remote(local_dir, key, self._save_retry_for, save.trial.id)
        self._track_pending(Pending(save.trial, Kind.SAVE, save.generation, save.extra), ref)

    def _restore(self, trial: Trial, action: Restore) -> None:
        ckpt = action.checkpoint
        assert ckpt is not None
        skipped = [
            c.uri for c in trial._machine.checkpoints if c.key in trial._machine.bad_checkpoints
        ]
        if skipped:
            log.warning(
                "trial %s: restoring %s instead of the newer checkpoint(s) that could not be "
                "loaded: %s",
                trial.id,
                ckpt.uri,
                ", ".join(skipped),
            )
        # Local storage the nodes may not share: the actor loads the checkpoint only if
        # it sees it, and says so otherwise (then it is streamed from a node that does).
        look_first = self._node_local and ckpt.path is not None
        self._submit_restore(trial, ckpt, None, look_first=look_first)

    def _fetch(self, trial: Trial, ckpt: Checkpoint) -> None:
        """Stream ``ckpt`` to the trial's node from a live node that sees it."""
        staged = fetch_dir(trial.id, trial._machine.generation)
        task = asyncio.ensure_future(self._stream_from_where_visible(ckpt, trial.node_id, staged))
        self._track_task(trial, Kind.FETCH, task, (ckpt, staged))

    async def _stream_from_where_visible(
        self, ckpt: Checkpoint, target: str | None, staged: str
    ) -> None:
        # Imported here: trial workers that import this module skip them.
        import transfer

        from .node_local import find_visible

        assert ckpt.path is not None and target is not None
        source = await find_visible(ckpt, skip=target)
        if source is None:
            raise CheckpointNotVisible(
                f"{ckpt.uri} is not visible from any live node (it was saved on host "
                f"{ckpt.host or 'unknown'}, node {ckpt.node_id or 'unknown'})"
            )
        self._fetches += 1
        await transfer.copy_dir(source, ckpt.path, target, staged)

    def _submit_restore(
        self, trial: Trial, ckpt: Checkpoint, local_dir: str | None, *, look_first: bool = False
    ) -> None:
        ref = trial._actor.restore.remote(
            trial.id, self._next_seq(trial), ckpt.to_dict(), local_dir, look_first
        )
        self._track(trial, Kind.RESTORE, ref, ckpt)

    def _stop_actor(self, trial: Trial, action: StopActor) -> None:
        actor, host = trial._actor, trial._host
        trial._actor = trial._host = None
        if actor is None or host is None:
            return
        last = self._hosts.leave(host, trial.id)
        if not action.graceful:
            if last:
                _kill(actor)
            else:  # the other trials it hosts carry on
                actor.drop.remote(trial.id, action.generation)
            return
        stopped = actor.stop.remote(trial.id, self._next_seq(trial))
        if not last:
            self._track(trial, Kind.STOP, stopped, None)
            return
        self._track(trial, Kind.STOP, actor.shutdown.remote(stopped), actor)
        assert self._loop is not None
        self._loop.call_later(STOP_GRACE_S, _kill, actor)

    def _report(self, trial: Trial, action: Report) -> None:
        result = action.result  # a fresh dict the machine built for this result
        assert isinstance(result, dict)
        clean_result(result, self._result_warnings.for_trial(trial.id))
        trial.results.append(result)
        trial.last_result = result
        if self._journal is not None:
            self._journal.record_result(trial, result)
        if self._hooks.wants("on_trial_result"):
            self._hooks.emit(trial.id, "on_trial_result", trial, result)

    def _rollback(self, trial: Trial, action: Rollback) -> None:
        trial._runs_started += 1
        keep = action.iteration
        results = trial.results
        if results and results[-1].get("training_iteration", 0) > keep:
            cut = len(results)
            while cut and results[cut - 1].get("training_iteration", 0) > keep:
                cut -= 1
            dropped = len(results) - cut
            del results[cut:]
            if self._journal is not None:
                self._journal.truncate(trial, cut)
            trial.discarded_results += dropped
            log.info(
                "trial %s: continuing from iteration %d; discarded %d later result(s) of "
                "the abandoned run",
                trial.id,
                keep,
                dropped,
            )
        trial.last_result = results[-1] if results else None

    def _record_checkpoint(self, trial: Trial, action: RecordCheckpoint) -> None:
        log.debug("trial %s: checkpoint %s persisted", trial.id, action.checkpoint.uri)

    def _delete_checkpoints(self, trial: Trial, action: DeleteCheckpoints) -> None:
        if self._journal is None:
            self._collector.submit(action.checkpoints)
            return
        # Not before the journal lists their successors: a resumed driver uses only the
        # checkpoints its journal names.
        delete = functools.partial(self._collector.submit, action.checkpoints)
        self._journal.after_next_write(delete)

    def _notify(self, trial: Trial, action: Notify) -> None:
        if action.hook == "on_trial_error":
            (error,) = action.args
            log.warning("%s (failure %d)", error, trial.num_failures)
        self._hooks.emit(trial.id, action.hook, trial, *action.args)

    def _allocate_key(self, trial: Trial, iteration: int) -> str:
        """A key never used before by this trial: a rolled-back run may save the same
        iteration again, and overwriting a committed checkpoint would not be atomic."""
        used = self._keys.setdefault(trial.id, set())
        key = f"{trial.id}/checkpoint_{iteration:06d}"
        n = 1
        while key in used:
            key = f"{trial.id}/checkpoint_{iteration:06d}.{n}"
            n += 1
        used.add(key)
        return key


_EXECUTORS: dict[type[Action], Callable[[Dispatcher, Trial, Any], None]] = {
    StartActor: Dispatcher._start_actor,
    Train: Dispatcher._train,
    Save: Dispatcher._save,
    Restore: Dispatcher._restore,
    StopActor: Dispatcher._stop_actor,
    Report: Dispatcher._report,
    Rollback: Dispatcher._rollback,
    RecordCheckpoint: Dispatcher._record_checkpoint,
    DeleteCheckpoints: Dispatcher._delete_checkpoints,
    Notify: Dispatcher._notify,
}


def _actor_options(resources: Mapping[str, float]) -> dict[str, Any]:
    options: dict[str, Any] = {"max_restarts": 0, "max_task_retries": 0}
    custom: dict[str, float] = {}
    for name, amount in resources.items():
        lowered = name.lower()
        if lowered == "cpu":
            options["num_cpus"] = amount
        elif lowered == "gpu":
            options["num_gpus"] = amount
        elif lowered == "memory":
            options["memory"] = amount
        else:
            custom[name] = amount
    options.setdefault("num_cpus", 1)
    if custom:
        options["resources"] = custom
    return options


def _ray_demand(resources: Mapping[str, float], trials: int) -> dict[str, float]:
    """What an actor for ``trials`` trials asking ``resources`` reserves, in Ray's names."""
    options = _actor_options({k: v * trials for k, v in resources.items()})
    demand = {"CPU": float(options["num_cpus"])}
    if "num_gpus" in options:
        demand["GPU"] = float(options["num_gpus"])
    if "memory" in options:
        demand["memory"] = float(options["memory"])
    demand.update(options.get("resources", {}))
    return {k: v for k, v in demand.items() if v > 0}


def _shown(resources: Mapping[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(resources.items())) + "}"


def _log_crash(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("checking the cluster's resources failed: %s", task.exception())


def _kill(actor: Any) -> None:
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # already gone, or Ray is shutting down
        pass


def _is_lost(err: BaseException) -> bool:
    return isinstance(err, _LOST) and not isinstance(err, RayTaskError)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:500]
    return type(err).__name__
