"""The dispatcher: one asyncio loop that drives every trial.

Every piece of work on an actor (start, train, save, restore, stop) is an ``ObjectRef``
in one table of in-flight work, each entry naming its trial, kind, actor generation and
a typed payload (:class:`~orchestrator.engine.outcomes.Pending`). Ray resolves the refs on its
own threads; a completion is handed to the asyncio loop (``call_soon_threadsafe``),
queued in one inbox with the users' requests, and served in order: the completion is
read into an event (:mod:`orchestrator.engine.outcomes`), the trial's state machine decides
(:mod:`orchestrator.core.machine`), and the executor carries out the actions it returns
(:mod:`orchestrator.engine.executor`). Nothing here calls ``ray.get`` or waits on one trial: a
trial whose actor waits minutes for a node simply has a ref that has not completed
yet. The cost per completion is O(1), whatever the number of trials.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.core.events import Event, Failure, Launch, SaveDone
from orchestrator.core.settings import StorageMode
from orchestrator.engine.bookkeeper import Bookkeeper
from orchestrator.engine.collector import CheckpointCollector
from orchestrator.engine.executor import Executor, RaySettings
from orchestrator.engine.history import SpilledHistory
from orchestrator.engine.hooks import HookRunner
from orchestrator.engine.outcomes import CallKind, Outcomes, Payload, Pending
from orchestrator.engine.ray_calls import RAY, RayBackend
from orchestrator.engine.resource_watch import ResourceWatch
from orchestrator.errors import InvalidTransition, OrchestratorError, TrialError

if TYPE_CHECKING:
    from orchestrator.engine.ports import JournalPort
    from orchestrator.engine.trial_runtime import TrialRuntime

log = logging.getLogger("orchestrator.engine.loop")

#: Seconds between looks at the lease while it is in doubt (see ``drive_only_while``).
DOUBT_POLL_S = 0.1

__all__ = ["CallKind", "Dispatcher", "LoopStatistics"]


@dataclass(frozen=True)
class LoopStatistics:
    events: int
    results: int
    in_flight: int
    in_flight_by_kind: Mapping[str, int] = field(default_factory=dict)
    fetches: int = 0  # checkpoints streamed from another node for a restore


Inbound = tuple["TrialRuntime", Event] | tuple[Pending, "Future[Any] | asyncio.Future[Any]"]


class Dispatcher:
    """The loop (see the module docstring): ``ray`` says how trials run on Ray,
    ``uri_for`` and ``local_path_for`` name a checkpoint key's URI and local path, and
    ``backend`` is the Ray it calls (Ray itself; a test's fake)."""

    def __init__(
        self,
        ray: RaySettings,
        *,
        uri_for: Callable[[str], str],
        local_path_for: Callable[[str], str | None],
        hooks: HookRunner,
        collector: CheckpointCollector,
        journal: JournalPort | None = None,
        backend: RayBackend = RAY,
    ) -> None:
        self._trials: dict[str, TrialRuntime] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._kill = backend.kill
        self._backend = backend
        self.executor = Executor(self, ray, collector, backend)
        self.bookkeeper = Bookkeeper(
            trials=self._trials,
            notify=self.notify,
            loop=self._running_loop,
            hooks=hooks,
            collector=collector,
            journal=journal,
        )
        self._outcomes = Outcomes(
            uri_for=uri_for,
            local_path_for=local_path_for,
            remote_storage=ray.storage_mode is StorageMode.REMOTE,
            refs=collector.refs,
        )
        self._journal = journal
        self._collector = collector
        self._hooks = hooks
        self._unsettled: set[str] = set()
        self._launch_queued: set[str] = set()  # trials with a Launch not yet handled
        self._settled = asyncio.Event()
        self._settled.set()
        self._in_flight: set[Pending] = set()
        # A trial's setup in flight (its generation), and a first train call that came
        # back before it (sent behind the setup, see StartActor): served right after it.
        self._readying: dict[str, int] = {}
        self._behind_ready: dict[tuple[str, int], Inbound] = {}
        self._inbox: collections.deque[Inbound] = collections.deque()
        # Completions from Ray's threads, waiting for the loop to drain them.
        self._from_ray_queue: collections.deque[tuple[Pending, Future[Any]]] = collections.deque()
        self._drain_scheduled = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._watch = ResourceWatch(
            self._trials, self.executor.waiting, lambda: self.running, backend.nodes
        )
        # Checkpoint keys to keep although no machine pins them yet: a sweep's exploit
        # of a paused trial waiting for a slot (its donor's checkpoint must stay).
        self.pins: set[str] = set()
        self._events = 0
        self.running = False
        self._aborted: BaseException | None = None
        self._may_drive: Callable[[], bool] | None = None

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        assert self.loop is not None
        return self.loop

    # -- lifetime ----------------------------------------------------------------------

    def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.running = True
        self._task = self.loop.create_task(self._serve(), name="orchestrator-loop")
        self._watch.start(self.loop)

    async def aclose(self) -> None:
        """Stop every live actor and the loop. Trials keep their state and history."""
        for rt in self._trials.values():
            if rt.actor is not None:
                self._kill(rt.actor)
                rt.actor = rt.host = None
        for host in self.executor.hosts.take_idle(spares=True):
            self._kill(host.actor)
        self.executor.close()
        self.running = False
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        await self.executor.retiring.finish()  # cleanups get the rest of their grace
        for rt in self._trials.values():
            rt.fail_waiters(
                TrialError(rt.id, "the orchestrator closed before the request completed")
            )

    def drive_only_while(self, may_drive: Callable[[], bool]) -> None:
        """Serve nothing while ``may_drive()`` is False (the experiment's lease is in
        doubt: storage did not take its renewals), so no new work reaches an actor
        when another driver may already be running the experiment."""
        self._may_drive = may_drive

    def abort(self, error: BaseException) -> None:
        """Dispatch nothing more, and make ``run()`` (:meth:`wait_settled`) raise
        ``error``: the driver may no longer drive this experiment (its lease was lost)."""
        self._aborted = error
        self._wake.set()
        self._settled.set()

    @property
    def failed(self) -> BaseException | None:
        """The loop's own crash (a bug), if it crashed."""
        if self._task is not None and self._task.done() and not self._task.cancelled():
            return self._task.exception()
        return None

    # -- trials ------------------------------------------------------------------------

    @property
    def trials(self) -> Mapping[str, TrialRuntime]:
        return self._trials

    @property
    def hooks(self) -> HookRunner:
        return self._hooks

    def attach(self, rt: TrialRuntime) -> None:
        self._trials[rt.id] = rt
        # A user's result hook paces the trial (its policy's hook_progress, bound to
        # this loop's hook runner by the session): this runner owes it nothing yet.
        rt.machine.hooks_restarted()
        self._hooks.count_results_from(rt.id, rt.machine.results_reported)
        self.executor.known_keys(rt)
        if self._journal is not None:
            self._journal.track(rt)

    def launch(self, rt: TrialRuntime) -> None:
        """Start a PENDING trial; a trial whose start is already queued is left as is
        (``add_trial`` during one ``run()`` and the next ``run()`` may both ask)."""
        if rt.id in self._launch_queued:
            return
        self._launch_queued.add(rt.id)
        self.request(rt, Launch())

    def request(self, rt: TrialRuntime, event: Event, *, first: bool = False) -> None:
        """Queue ``event`` for the trial; the loop handles it in order with all others
        (``first``: before every event queued so far, results included)."""
        self._unsettled.add(rt.id)
        self._settled.clear()
        if first:
            self._inbox.appendleft((rt, event))
        else:
            self._inbox.append((rt, event))
        self._wake.set()

    def notify(self, rt: TrialRuntime, event: Event) -> None:
        """Queue an event of the loop's own (not a request: the trial's settledness is
        the machine's to say)."""
        self._inbox.append((rt, event))
        self._wake.set()

    async def wait_settled(self) -> None:
        """Return once every trial is TERMINATED, ERROR or PAUSED with nothing queued."""
        while True:
            if self._task is None:
                raise OrchestratorError("the orchestrator closed while run() was waiting")
            waiter = asyncio.ensure_future(self._settled.wait())
            try:
                done, _ = await asyncio.wait(
                    {waiter, self._task}, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                # Also when the caller is cancelled: a waiter left on the event would
                # stay pending, and be reported ("Task was destroyed but it is
                # pending!") wherever the garbage collector finds it later.
                waiter.cancel()
            if self._aborted is not None:
                raise self._aborted
            if self._task in done:
                self._task.result()  # re-raise the loop's crash
                raise RuntimeError("the orchestrator loop ended unexpectedly")
            if self.settled_now():
                return

    def is_settled(self, rt: TrialRuntime) -> bool:
        """The trial is settled and no request for it waits in the inbox."""
        return rt.id not in self._unsettled and rt.state.is_settled

    def settled_now(self) -> bool:
        return not self._inbox and not self._unsettled

    def is_pinned(self, key: str) -> bool:
        if key in self.pins:
            return True
        return any(key in rt.pinned for rt in self._trials.values())

    def keep_idle_workers(self, keep: bool) -> bool:
        """Keep the workers trials leave for the next trial (actor reuse); returns the
        setting it replaces."""
        before = self.executor.hosts.keep_idle
        self.executor.hosts.keep_idle = keep
        return before

    async def warm_workers(self, resources: Mapping[str, float], count: int) -> int:
        """Start ``count`` workers of shape ``resources`` now, for trials about to come
        (a sweep's, kept by actor reuse); how many were started."""
        return await self.executor.warm_workers(resources, count)

    def retire_idle_workers(self) -> None:
        """Stop the idle workers no trial took (their reuse is over)."""
        self.executor.retire_idle()

    async def cluster_resources(self) -> Mapping[str, float]:
        """The cluster's total resources, in Ray's names (read in a thread)."""
        return await asyncio.to_thread(self._backend.cluster_resources)

    def statistics(self) -> LoopStatistics:
        by_kind: dict[str, int] = collections.Counter(p.kind.value for p in self._in_flight)
        return LoopStatistics(
            self._events,
            self._outcomes.results,
            len(self._in_flight),
            dict(by_kind),
            self.executor.fetches,
        )

    # -- the in-flight table -----------------------------------------------------------

    def track(self, rt: TrialRuntime, kind: CallKind, ref: Any, payload: Payload = None) -> None:
        self.track_pending(Pending(rt, kind, rt.machine.generation, payload), ref)

    def track_pending(self, pending: Pending, ref: Any) -> None:
        self._in_flight.add(pending)
        if pending.kind is CallKind.READY:
            self._readying[pending.runtime.id] = pending.generation
        ref.future().add_done_callback(functools.partial(self._from_ray, pending))

    def track_task(
        self, rt: TrialRuntime, kind: CallKind, task: asyncio.Task[Any], payload: Payload
    ) -> None:
        self.track_pending_task(Pending(rt, kind, rt.machine.generation, payload), task)

    def track_pending_task(self, pending: Pending, task: asyncio.Task[Any]) -> None:
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
        loop = self.loop
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

    # -- serving -----------------------------------------------------------------------

    async def _serve(self) -> None:
        inbox = self._inbox
        read = self._outcomes.read
        while True:
            if not inbox:
                self._wake.clear()
                await self._wake.wait()
            if self._aborted is not None:
                return
            if self._may_drive is not None and not self._may_drive():
                await asyncio.sleep(DOUBT_POLL_S)  # until the lease is renewed, or lost
                continue
            while inbox:
                head, tail = inbox.popleft()
                if isinstance(head, Pending):
                    if head.kind is CallKind.TRAIN and self._out_of_order(head, tail):
                        continue
                    event, follow_ups = read(head, tail)
                    for item in follow_ups:
                        self._carry_out(head.runtime, self.executor.follow_up, item)
                    if follow_ups and self._journal is not None:
                        self._journal.changed(head.runtime)
                    if event is not None:
                        self._dispatch(head.runtime, event)
                    if head.kind is CallKind.READY:
                        self._ready_served(head)
                else:
                    self._dispatch(head, tail)  # type: ignore[arg-type]

    def _out_of_order(self, head: Pending, tail: Any) -> bool:
        """A trial's first train call answered before its setup's answer was served
        (Ray answers one actor's calls in order, but nothing here relies on it): held
        until then, so the machine sees the actor ready before its first result."""
        trial_id = head.runtime.id
        if self._readying.get(trial_id) == head.generation:
            self._behind_ready[trial_id, head.generation] = (head, tail)
            return True
        return False

    def _ready_served(self, head: Pending) -> None:
        trial_id = head.runtime.id
        if self._readying.get(trial_id) == head.generation:
            del self._readying[trial_id]
        held = self._behind_ready.pop((trial_id, head.generation), None)
        if held is not None:
            self._inbox.appendleft(held)

    def _dispatch(self, rt: TrialRuntime, event: Event) -> None:
        self._events += 1
        if type(event) is Launch:
            self._launch_queued.discard(rt.id)
        before = rt.state
        try:
            actions = rt.machine.handle(event)
        except InvalidTransition:
            log.exception("trial %s: dropped an event the machine refused", rt.id)
            actions = []
        if before.is_terminal and isinstance(rt.results, SpilledHistory):
            if not rt.state.is_terminal:  # back: its actions may cut or extend it
                rt.results = rt.results.load()
        for action in actions:
            book = self.bookkeeper
            do = book.execute if book.handles(action) else self.executor.execute
            if not self._carry_out(rt, do, action):
                break
        rt.wake_waiters(event)
        self._note_settled(rt)
        if before.is_terminal and not rt.state.is_terminal and rt.observer is not None:
            rt.observer.on_revived(rt)
        settled = rt.state is not before and rt.state.is_settled
        if self._journal is not None:
            self._journal.changed(rt)
            if settled:
                self._journal.urgent()  # a driver killed now must not run it again
            elif type(event) is SaveDone:
                self._journal.soon()  # nor run again the steps this checkpoint holds
            else:
                self._journal.touch()
        if settled:
            self.executor.spares.retire_unneeded()
            if rt.observer is not None:
                rt.observer.on_settled(rt)

    def _carry_out(
        self, rt: TrialRuntime, do: Callable[[TrialRuntime, Any], None], item: Any
    ) -> bool:
        """Do ``item``; a failure to submit it to Ray is a failure of the trial."""
        try:
            do(rt, item)
            return True
        except Exception as err:
            log.exception("trial %s: could not carry out %s", rt.id, item)
            gen = rt.machine.generation
            cause = TrialError(rt.id, f"could not {type(item).__name__}: {err}", err)
            cause.__cause__ = err
            self._inbox.append((rt, Failure(gen, cause, actor_died=True)))
            self._wake.set()
            return False

    def _note_settled(self, rt: TrialRuntime) -> None:
        if rt.state.is_settled:
            self._unsettled.discard(rt.id)
            if not self._unsettled:
                self._settled.set()
        else:
            self._unsettled.add(rt.id)
            self._settled.clear()
