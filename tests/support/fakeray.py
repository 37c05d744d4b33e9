"""An in-process Ray for the engine's tests: actors are real objects on threads.

The engine reaches Ray through a :class:`~orchestrator.engine.ray_calls.RayBackend`;
:class:`FakeRay` is one. Its trial actors are the real
:class:`~orchestrator.actor.trial_actor.TrialActor` (setup, train, save into scratch
space and real local storage, restore: the actor's own logic runs), and its persisters
the real :class:`~orchestrator.actor.persister.CheckpointPersister`. What it fakes is
the process boundary only:

* each actor runs its calls on threads of its own (one: in submission order, as a Ray
  actor does; a persister four), and every ``.remote(...)`` returns a :class:`FakeRef`
  whose ``future()`` is a ``concurrent.futures.Future`` resolved on that thread, as
  Ray resolves ObjectRefs on its own threads; arguments and answers are pickled on the
  way, as Ray serialises them, and a ref passed as an argument is waited for first;
* an exception raised by a method reaches the driver as Ray's
  ``RayTaskError(<its class>)``, pickled on the way; a killed actor, one on a removed
  node, or one whose constructor raised fails its calls with ``ActorDiedError``
  (``kill``, :meth:`FakeRay.kill_node`);
* actors reserve their ``num_cpus``/``num_gpus``/custom resources on the first node
  with room (or the node their ``NodeAffinitySchedulingStrategy`` names) and wait,
  calls queued, while none has room;
* a test can hold a call before it runs (:meth:`FakeRay.hold`: a step that hangs until
  released or killed), hold its answer (``answer=True``: a completion delayed), and
  name the nodes (``FakeRay(nodes=...)``, :meth:`add_node`).

All nodes share this machine's disk, as ``ray.cluster_utils`` nodes do. A trainable
that truly never returns must not be used here (a thread cannot be killed): hold its
call instead.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import queue
import shutil
import threading
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any

from ray import cloudpickle
from ray import exceptions as rex

from orchestrator.actor.locality import delete_if_visible, is_visible
from orchestrator.actor.persister import UPLOADS_PER_NODE, CheckpointPersister
from orchestrator.actor.trial_actor import TrialActor
from orchestrator.core.checkpoints import Checkpoint
from orchestrator.engine.node_local import LiveNode, search_order

__all__ = [
    "TRAIN",
    "FakeActor",
    "FakeRay",
    "FakeRef",
    "Gate",
    "ProcessDied",
    "actor_died",
    "current_actor",
    "task_error",
]

#: The trial actor's train calls (which one the executor makes depends on buffering).
TRAIN = ("train", "train_sole", "train_sole_run_on", "train_many")

_ids = itertools.count(1)
_pids = itertools.count(4_000_001)  # above the default pid_max: no real process has one
_here = threading.local()


def current_actor() -> FakeActor | None:
    """The fake actor whose thread this is (None on any other thread): what a
    trainable reports instead of ``os.getpid()`` to tell its worker processes apart."""
    actor: FakeActor | None = getattr(_here, "actor", None)
    return actor


class ProcessDied(BaseException):
    """Raised by code in a fake actor: its "process" ends there (``os._exit`` in a real
    worker, which in-process code must never call)."""


class FakeRef:
    """An ObjectRef: ``future()`` gives a new ``concurrent.futures.Future`` for the
    call's answer each time (cancelling one leaves the others, as with Ray)."""

    def __init__(self) -> None:
        self._answer: Future[Any] = Future()
        self.cancelled = False  # ray.cancel: a call that has not started never runs

    def future(self) -> Future[Any]:
        fresh: Future[Any] = Future()
        self._answer.add_done_callback(lambda done: _copy_outcome(done, fresh))
        return fresh

    def done(self) -> bool:
        return self._answer.done()

    def _settle(self, value: Any = None, error: BaseException | None = None) -> bool:
        try:
            if error is not None:
                self._answer.set_exception(error)
            else:
                self._answer.set_result(value)
            return True
        except InvalidStateError:  # settled already (the actor died meanwhile)
            return False

    def _wait(self) -> Any:
        """The answer, for a call that takes this ref as an argument."""
        return self._answer.result()


def _copy_outcome(source: Future[Any], target: Future[Any]) -> None:
    try:
        if source.exception() is not None:
            target.set_exception(source.exception())
        else:
            target.set_result(source.result())
    except InvalidStateError:  # the target was cancelled
        pass


class Gate:
    """Holds the calls it matched until :meth:`open`: a call before it runs (released
    by its actor's death too), or a call's answer (delivered once open, whatever
    happened to its actor since: the answer exists)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = threading.Event()
        self._reached = threading.Event()
        self._parked: list[Callable[[], None]] = []
        self.held = 0  # calls that reached it

    def open(self) -> None:
        with self._lock:
            self._open.set()
            parked, self._parked = self._parked, []
        for deliver in parked:
            deliver()

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    async def reached(self, timeout: float = 30.0) -> None:
        """Return once a call reached the gate."""
        if not await asyncio.to_thread(self._reached.wait, timeout):
            raise AssertionError(f"no call reached the gate within {timeout} s")

    def _wait(self, actor: FakeActor) -> None:
        self.held += 1
        self._reached.set()
        while not self._open.wait(0.02) and not actor.dead:
            pass

    def _park(self, deliver: Callable[[], None]) -> None:
        with self._lock:
            self.held += 1
            self._reached.set()
            if not self._open.is_set():
                self._parked.append(deliver)
                return
        deliver()


@dataclass
class _Rule:
    methods: tuple[str, ...]
    trial: str | None
    answer: bool
    gate: Gate
    times: int | None  # None: every matching call
    after: int  # matching calls to let through first


@dataclass
class FakeNode:
    name: str
    node_id: str  # a Ray node id (56 hex digits), derived from the name
    host: str
    total: dict[str, float]
    free: dict[str, float] = field(default_factory=dict)
    alive: bool = True

    def fits(self, demand: Mapping[str, float]) -> bool:
        return self.alive and all(self.free.get(k, 0.0) >= v - 1e-9 for k, v in demand.items())


@dataclass(frozen=True)
class Call:
    method: str
    args: tuple[Any, ...]


class _ActorId:
    def __init__(self, value: str) -> None:
        self._value = value

    def hex(self) -> str:
        return self._value


class FakeActorHandle:
    """What the engine holds (``rt.actor``): ``handle.method.remote(...)``."""

    def __init__(self, actor: FakeActor) -> None:
        self._fake_actor = actor
        self._actor_id = _ActorId(actor.actor_id)

    def __getattr__(self, name: str) -> _Method:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Method(self._fake_actor, name)

    def __repr__(self) -> str:
        return f"FakeActorHandle({self._fake_actor.name})"


@dataclass(frozen=True)
class _Method:
    actor: FakeActor
    name: str

    def remote(self, *args: Any, **kwargs: Any) -> FakeRef:
        return self.actor.submit(self.name, args, kwargs)

    def options(self, **options: Any) -> _Method:
        return self


class FakeActor:
    """One actor: an instance of its class, built on its node, calls on its threads."""

    def __init__(
        self,
        fake: FakeRay,
        name: str,
        build: Callable[..., Any],
        args: tuple[Any, ...],
        options: Mapping[str, Any],
        concurrency: int,
    ) -> None:
        self.fake = fake
        self.name = name
        self.actor_id = f"{next(_ids):032x}"
        self.pid = next(_pids)  # its "process", for a trainable to report
        self.options = dict(options)
        self.demand = _demand(options)
        self.node: FakeNode | None = None
        self.instance: Any = None
        self.calls: list[Call] = []
        self.dead = False
        self.death: str | None = None
        self.handle = FakeActorHandle(self)
        self._build, self._args = build, args
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._in_flight: set[FakeRef] = set()
        self._built = threading.Event()
        self._queue.put(self._construct)
        self._threads = concurrency
        for i in range(concurrency):
            threading.Thread(target=self._serve, name=f"{name}-{i}", daemon=True).start()

    @property
    def node_id(self) -> str | None:
        return self.node.node_id if self.node is not None else None

    @property
    def trials(self) -> list[str]:
        """The trials a trial actor hosts now."""
        return list(getattr(self.instance, "_trials", {}))

    def submit(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> FakeRef:
        ref = FakeRef()
        with self.fake.lock:
            if self.dead:
                ref._settle(error=self._died_error())
                return ref
            self.calls.append(Call(method, args))
            self._in_flight.add(ref)
            self._queue.put(lambda: self._run(method, args, kwargs, ref))
        return ref

    # -- on the actor's threads ------------------------------------------------------

    def _serve(self) -> None:
        _here.actor = self
        while True:
            job = self._queue.get()
            if job is None:
                return
            if not self.dead:
                job()

    def _construct(self) -> None:
        self.fake._placed(self)  # waits for resources
        if self.dead:
            return
        try:
            assert self.node is not None
            self.instance = self._build(self.node, *_copied(self._args))
        except Exception as err:
            self.fake._die(self, f"its constructor raised {type(err).__name__}: {err}")
        finally:
            self._built.set()

    def _run(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], ref: FakeRef
    ) -> None:
        self._built.wait()
        gate = self.fake._gate_for(self, method, args, answer=False)
        if gate is not None:
            gate._wait(self)
        if self.dead:
            return
        if ref.cancelled:
            self._answer(method, args, ref, error=rex.TaskCancelledError())
            return
        try:
            args = tuple(a._wait() if isinstance(a, FakeRef) else a for a in args)
        except BaseException as err:  # an argument's call failed: so does this one
            self._answer(method, args, ref, error=err)
            return
        try:
            value = getattr(self.instance, method)(*_copied(args), **_copied(kwargs))
        except (SystemExit, KeyboardInterrupt, ProcessDied) as err:  # the process ends
            self.fake._die(self, f"{type(err).__name__} in {method}")
            return
        except Exception as err:
            self._answer(method, args, ref, error=task_error(err, f"{self.name}.{method}"))
            return
        self._answer(method, args, ref, value=_copied(value))

    def _answer(
        self,
        method: str,
        args: tuple[Any, ...],
        ref: FakeRef,
        value: Any = None,
        error: BaseException | None = None,
    ) -> None:
        gate = self.fake._gate_for(self, method, args, answer=True)
        with self.fake.lock:
            if self.dead:
                return  # its death failed the call already
            self._in_flight.discard(ref)
        if gate is None:
            ref._settle(value, error)
        else:
            gate._park(lambda: ref._settle(value, error))

    # -- death -------------------------------------------------------------------------

    def _died_error(self) -> rex.ActorDiedError:
        return actor_died(self.actor_id, f"fake {self.name} {self.actor_id[-8:]}: {self.death}")

    def _end(self, why: str) -> list[FakeRef]:
        """Mark it dead (under the fake's lock); the calls it will never answer."""
        self.dead, self.death = True, why
        failed, self._in_flight = list(self._in_flight), set()
        self._built.set()
        for _ in range(self._threads):
            self._queue.put(None)
        return failed


def actor_died(actor_id: str = "0" * 32, why: str = "killed") -> rex.ActorDiedError:
    """What Ray raises on the driver for a call its actor's death left unanswered."""
    err = rex.ActorDiedError()
    err.actor_id = actor_id
    err.error_msg = f"The actor died unexpectedly before finishing this task ({why})"
    return err


def task_error(err: Exception, function_name: str = "TrialActor.train") -> BaseException:
    """What Ray raises on the driver when a remote call raised ``err``: the worker's
    ``RayTaskError`` pickled and unpickled on its way, as Ray sends it (attributes a
    class does not pickle are lost; a cause that cannot be pickled becomes a
    ``RayError`` naming it, one that cannot be unpickled ``UnserializableException``)."""
    text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    wrapped = rex.RayTaskError(function_name, text, err)
    try:
        sent = cloudpickle.loads(cloudpickle.dumps(wrapped))
    except Exception:
        return rex.UnserializableException(text)
    return sent.as_instanceof_cause()


class InProcessTrialActor(TrialActor):
    """The real trial actor, told its node (no ``ray.get_runtime_context()``) and given
    a scratch directory per host under the fake's own temporary directory."""

    def __init__(self, node: FakeNode, scratch_root: str, *args: Any) -> None:
        super().__init__(*args)
        self._fake_node = node
        self._fake_scratch = os.path.join(scratch_root, node.host)

    def _where(self) -> tuple[str, str]:
        return self._fake_node.node_id, self._fake_node.host

    def _scratch_parent(self) -> str:
        return self._fake_scratch

    def _announce(self) -> None:
        pass  # no worker log to name


class FakeRemoteClass:
    """A remote class: ``.options(**options).remote(*args)`` starts a :class:`FakeActor`."""

    def __init__(
        self,
        fake: FakeRay,
        name: str,
        build: Callable[..., Any],
        concurrency: int,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self._fake, self._name, self._build = fake, name, build
        self._concurrency, self._options = concurrency, dict(options or {})

    def options(self, **options: Any) -> FakeRemoteClass:
        merged = {**self._options, **options}
        return FakeRemoteClass(self._fake, self._name, self._build, self._concurrency, merged)

    def remote(self, *args: Any) -> FakeActorHandle:
        actor = FakeActor(
            self._fake, self._name, self._build, args, self._options, self._concurrency
        )
        return self._fake._started(actor)


class FakeRay:
    """An in-process Ray (see the module docstring); ``scratch`` is a directory for its
    actors' node-local scratch space, ``nodes`` maps node ids to their resources
    (default: one node, ``node-1``, with 4 CPUs, like the tests' real head node)."""

    def __init__(
        self,
        scratch: str | os.PathLike[str],
        nodes: Mapping[str, Mapping[str, float]] | None = None,
    ) -> None:
        self.lock = threading.RLock()
        self._scratch = os.fspath(scratch)
        self.nodes_by_id: dict[str, FakeNode] = {}
        self.nodes_by_name: dict[str, FakeNode] = {}
        self.actors: list[FakeActor] = []
        self._waiting: list[tuple[FakeActor, threading.Event]] = []
        for name, resources in (nodes or {"node-1": {"CPU": 4.0}}).items():
            self.add_node(name, resources)
        self._rules: list[_Rule] = []
        self.copies = 0
        scratch_root = self._scratch
        self.trial_actor = FakeRemoteClass(
            self,
            "TrialActor",
            lambda node, *args: InProcessTrialActor(node, scratch_root, *args),
            concurrency=1,
        )
        self.persister = FakeRemoteClass(
            self,
            "CheckpointPersister",
            lambda node, *args: CheckpointPersister(*args),
            concurrency=UPLOADS_PER_NODE,
        )

    # -- the RayBackend the engine calls -------------------------------------------------

    def kill(self, actor: Any) -> None:
        self._die(actor._fake_actor, "killed by ray.kill")

    def cancel(self, ref: Any) -> None:
        ref.cancelled = True

    def available_resources(self) -> dict[str, float]:
        with self.lock:
            free: dict[str, float] = {}
            for node in self.nodes_by_id.values():
                if node.alive:
                    for k, v in node.free.items():
                        free[k] = free.get(k, 0.0) + v
            return free

    def cluster_resources(self) -> dict[str, float]:
        with self.lock:
            total: dict[str, float] = {}
            for node in self.nodes_by_id.values():
                if node.alive:
                    for k, v in node.total.items():
                        total[k] = total.get(k, 0.0) + v
            return total

    def nodes(self) -> list[dict[str, Any]]:
        with self.lock:
            return [
                {
                    "NodeID": n.node_id,
                    "Alive": n.alive,
                    "Resources": dict(n.total),
                    "NodeManagerHostname": n.host,
                }
                for n in self.nodes_by_id.values()
            ]

    async def find_visible(self, ckpt: Checkpoint, skip: str | None) -> str | None:
        assert ckpt.path is not None
        live = [LiveNode(n.node_id, n.host) for n in self.nodes_by_id.values() if n.alive]
        for node_id in search_order(ckpt, live, skip):
            if self.sees(node_id, ckpt):
                return node_id
        return None

    async def copy_dir(self, source: str, ckpt: Checkpoint, target: str, staged: str) -> None:
        for node_id in (source, target):
            if not self.nodes_by_id[node_id].alive:
                raise rex.NodeDiedError(f"node {node_id} died during the copy")
        assert ckpt.path is not None
        await asyncio.to_thread(shutil.copytree, ckpt.path, staged, dirs_exist_ok=True)
        self.copies += 1

    async def delete_where_visible(self, root: str, ckpt: Checkpoint) -> bool:
        live = [LiveNode(n.node_id, n.host) for n in self.nodes_by_id.values() if n.alive]
        manifest = dict(ckpt.manifest) if ckpt.manifest is not None else None
        for node_id in search_order(ckpt, live, None):
            if self.sees(node_id, ckpt) and await asyncio.to_thread(
                delete_if_visible, root, ckpt.key, manifest
            ):
                return True
        return False

    def sees(self, node_id: str, ckpt: Checkpoint) -> bool:
        """Whether node ``node_id`` sees ``ckpt`` on its disk (replace to model disks
        that are not shared; by default every node sees this machine's disk)."""
        assert ckpt.path is not None
        return is_visible(ckpt.path, dict(ckpt.manifest) if ckpt.manifest else None)

    # -- what tests do ---------------------------------------------------------------------

    def add_node(
        self, name: str, resources: Mapping[str, float], host: str = "fakehost"
    ) -> FakeNode:
        with self.lock:
            node_id = hashlib.sha224(name.encode()).hexdigest()
            node = FakeNode(name, node_id, host, dict(resources), dict(resources))
            self.nodes_by_id[node_id] = node
            self.nodes_by_name[name] = node
            self._schedule()
            return node

    def kill_worker(self, pid: int) -> None:
        """SIGKILL the "process" ``pid`` (a :attr:`FakeActor.pid`): its actor dies.
        ProcessLookupError if it is gone already, as for a real process."""
        (actor,) = [a for a in self.actors if a.pid == pid]
        if actor.dead:
            raise ProcessLookupError(pid)
        self._die(actor, f"its process {pid} was killed")

    def node(self, name: str) -> FakeNode:
        return self.nodes_by_name[name]

    def kill_node(self, name: str) -> None:
        """The node dies: its actors with it (their calls fail with ActorDiedError)."""
        with self.lock:
            node = self.nodes_by_name[name]
            node.alive = False
            doomed = [a for a in self.actors if a.node is node and not a.dead]
        for actor in doomed:
            self._die(actor, f"its node {name} died")

    def hold(
        self,
        methods: str | Iterable[str],
        *,
        trial: str | None = None,
        answer: bool = False,
        times: int | None = 1,
        after: int = 0,
    ) -> Gate:
        """Hold the next ``times`` calls (None: all) of ``methods`` (for ``trial``, if
        given; the first ``after`` such calls pass) at a gate: before they run (a call
        that hangs), or with ``answer`` after they ran, before their answer reaches the
        driver (a completion delayed). The actor's death releases its held calls, which
        then fail as its other calls do."""
        names = (methods,) if isinstance(methods, str) else tuple(methods)
        gate = Gate()
        with self.lock:
            self._rules.append(_Rule(names, trial, answer, gate, times, after))
        return gate

    def actor_of(self, handle: Any) -> FakeActor:
        actor: FakeActor = handle._fake_actor
        return actor

    def trial_actors(self, *, alive: bool = True) -> list[FakeActor]:
        with self.lock:
            return [a for a in self.actors if a.name == "TrialActor" and (not alive or not a.dead)]

    def persisters(self, *, alive: bool = True) -> list[FakeActor]:
        with self.lock:
            return [
                a
                for a in self.actors
                if a.name == "CheckpointPersister" and (not alive or not a.dead)
            ]

    def close(self) -> None:
        """Every actor dies (the session's end): their threads end."""
        for actor in list(self.actors):
            self._die(actor, "the fake Ray closed")
        for rule in self._rules:
            rule.gate.open()

    # -- internals -------------------------------------------------------------------

    def _started(self, actor: FakeActor) -> FakeActorHandle:
        with self.lock:
            self.actors.append(actor)
        return actor.handle

    def _placed(self, actor: FakeActor) -> None:
        """On the actor's thread: wait until a node has room for it, and take it."""
        ready = threading.Event()
        with self.lock:
            self._waiting.append((actor, ready))
            self._schedule()
        while not ready.wait(0.05) and not actor.dead:
            pass

    def _schedule(self) -> None:
        with self.lock:
            still: list[tuple[FakeActor, threading.Event]] = []
            for actor, ready in self._waiting:
                node = None if actor.dead else self._node_for(actor)
                if node is None and not actor.dead:
                    still.append((actor, ready))
                    continue
                if node is not None:
                    for k, v in actor.demand.items():
                        node.free[k] = node.free.get(k, 0.0) - v
                    actor.node = node
                ready.set()
            self._waiting = still

    def _node_for(self, actor: FakeActor) -> FakeNode | None:
        strategy = actor.options.get("scheduling_strategy")
        pinned = getattr(strategy, "node_id", None)
        if pinned is not None:
            node = self.nodes_by_id.get(pinned)
            return node if node is not None and node.fits(actor.demand) else None
        return next((n for n in self.nodes_by_id.values() if n.fits(actor.demand)), None)

    def _die(self, actor: FakeActor, why: str) -> None:
        with self.lock:
            if actor.dead:
                return
            failed = actor._end(why)
            node = actor.node
            if node is not None:
                for k, v in actor.demand.items():
                    node.free[k] = node.free.get(k, 0.0) + v
            self._schedule()
        error = actor._died_error()
        for ref in failed:
            ref._settle(error=error)
        io = getattr(actor.instance, "_io", None)
        if io is not None:  # the process's storage loop goes with it
            threading.Thread(target=io.close, daemon=True).start()

    def _gate_for(
        self, actor: FakeActor, method: str, args: Sequence[Any], answer: bool
    ) -> Gate | None:
        with self.lock:
            for rule in self._rules:
                if rule.answer is not answer or method not in rule.methods:
                    continue
                if rule.times is not None and rule.times <= 0:
                    continue
                if rule.trial is not None and not _is_for(actor, rule.trial, args):
                    continue
                if rule.after > 0:
                    rule.after -= 1
                    continue
                if rule.times is not None:
                    rule.times -= 1
                return rule.gate
        return None


def _is_for(actor: FakeActor, trial: str, args: Sequence[Any]) -> bool:
    if args:
        return trial in args
    return actor.trials == [trial]  # train_sole: the one trial it hosts


def _demand(options: Mapping[str, Any]) -> dict[str, float]:
    demand = {"CPU": float(options.get("num_cpus", 1))}
    if options.get("num_gpus"):
        demand["GPU"] = float(options["num_gpus"])
    if options.get("memory"):
        demand["memory"] = float(options["memory"])
    demand.update({k: float(v) for k, v in (options.get("resources") or {}).items()})
    return {k: v for k, v in demand.items() if v > 0}


def _copied(value: Any) -> Any:
    """``value`` as the other process gets it (Ray serialises arguments and answers)."""
    return cloudpickle.loads(cloudpickle.dumps(value))
