"""Uploading checkpoints: one persister actor per node, beside the trial actors.

A trial actor's ``save`` writes the checkpoint into node-local scratch space; the
node's persister uploads it (the driver hands it the save's ObjectRef, so the upload
starts exactly when the save is written) while the trial trains on. Why not upload from
the trial actor itself, in a concurrency group of its own: an actor with concurrency
groups runs *every* call through a thread pool, and that hand-off cost 150-200 us of
worker CPU per training step here (about 15% of the step rate for short steps). A
persister costs one worker process per node and nothing per step.

Until a node's persister is up, the trial actors there upload their checkpoints
themselves (``TrialActor.save_and_persist``; training waits for those few uploads).
The persister is a threaded actor (several uploads at once) using no CPU resource. If
it dies (its node died, or it was killed), the pool forgets it and the next save on
that node gets a new one; the save that was in flight fails its trial, which restores.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from orchestrator.actor.io import ActorIO

#: Uploads one persister runs at once (each on its own thread, bytes on one I/O loop).
UPLOADS_PER_NODE = 4


class CheckpointPersister:
    """Uploads the checkpoints that trial actors on its node saved to scratch space."""

    def __init__(self, storage_uri: str, storage_options: Mapping[str, Any]) -> None:
        self._io = ActorIO(storage_uri, storage_options)

    def persist(
        self,
        local_dir: str,
        key: str,
        retry_for: float,
        trial_id: str,
        follows: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        """Upload ``local_dir`` as checkpoint ``key`` and commit it; returns the manifest
        (see :meth:`ActorIO.persist`: retried while storage is unreachable; the blobs
        of the checkpoints ``follows`` names are not uploaded again)."""
        return self._io.persist(trial_id, local_dir, key, retry_for, follows)

    def ready(self) -> None:
        """Answers once the persister's process is up (see ``PersisterPool.is_ready``)."""

    def shutdown(self) -> None:
        """Close storage before the driver kills this actor: a process killed with its
        storage client open reports the client's session "Unclosed" in its log."""
        self._io.close()


RemotePersister: Any = ray.remote(max_concurrency=UPLOADS_PER_NODE)(  # type: ignore[call-overload]
    CheckpointPersister
)


def _kill(actor: Any) -> None:
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # already gone, or Ray is shutting down
        pass


class PersisterPool:
    """The driver's persister per node, created on first use (from ``remote_class``,
    :data:`RemotePersister` unless a test passes its fake Ray's, as it does ``kill``)."""

    def __init__(
        self,
        storage_uri: str,
        storage_options: Mapping[str, Any],
        runtime_env: Mapping[str, Any] | None,
        *,
        remote_class: Any = None,
        kill: Callable[[Any], None] = _kill,
    ) -> None:
        self._remote_class = RemotePersister if remote_class is None else remote_class
        self._kill = kill
        self._storage_uri = storage_uri
        self._storage_options = dict(storage_options)
        self._runtime_env = dict(runtime_env) if runtime_env else None
        self._by_node: dict[str, Any] = {}
        self._ready: set[str] = set()  # nodes whose persister has answered

    def for_node(self, node_id: str) -> Any:
        persister = self._by_node.get(node_id)
        if persister is None:
            options: dict[str, Any] = {
                "num_cpus": 0,
                "max_restarts": 0,
                "max_task_retries": 0,
                "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
            }
            if self._runtime_env is not None:
                options["runtime_env"] = self._runtime_env
            persister = self._remote_class.options(**options).remote(
                self._storage_uri, self._storage_options
            )
            self._by_node[node_id] = persister
            persister.ready.remote().future().add_done_callback(
                lambda done, node=node_id, handle=persister: self._answered(node, handle, done)
            )
        return persister

    def is_ready(self, node_id: str) -> bool:
        """Whether the node's persister is up. Until then (a worker process takes a second
        or more to start) the trial actors upload their checkpoints themselves, so the
        first checkpoints of an experiment are not held up by it."""
        return node_id in self._ready

    def _answered(self, node_id: str, handle: Any, done: Any) -> None:
        # On a Ray thread: only set membership, which is atomic.
        if done.exception() is None and self._by_node.get(node_id) is handle:
            self._ready.add(node_id)

    def forget_if_died(self, err: BaseException) -> bool:
        """When ``err`` reports the death of one of our persisters, forget it (the next
        save on its node starts a new one) and return True."""
        dead = getattr(err, "actor_id", None)
        if not dead:
            return False
        for node_id, persister in list(self._by_node.items()):
            if persister._actor_id.hex() == dead:
                del self._by_node[node_id]
                self._ready.discard(node_id)
                return True
        return False

    def close(self, retire: Callable[[Any, Any], None]) -> None:
        """Shut every persister down: each closes its storage, and ``retire`` (the
        executor's ``Retiring.add``: it takes the actor and its shutdown's ref) kills it
        once that answered, or at the experiment's stop deadline, so a close that hangs
        does not hold up the exit."""
        for persister in self._by_node.values():
            try:
                shutdown = persister.shutdown.remote()
            except Exception:  # Ray is shutting down: nothing to close it with
                self._kill(persister)
                continue
            retire(persister, shutdown)
        self._by_node.clear()
        self._ready.clear()
