"""The driver's small Ray calls: actor options from a trial's resources, what an actor
reserves in Ray's names, killing an actor that may already be gone, and the one seam
between the engine and Ray (:class:`RayBackend`).

The engine reaches Ray through a :class:`RayBackend`: the remote classes it starts
actors from, ``kill``, the cluster's resources and nodes, the two calls that stream a
checkpoint between nodes, and the delete of a checkpoint on the nodes that see it.
Production passes :data:`RAY` (Ray itself, these very functions: nothing is added on
the path of a step, whose calls go to the actor handle directly); the engine's tests
pass an in-process fake (``tests/support/fakeray.py``) whose actors are the real
:class:`~orchestrator.actor.trial_actor.TrialActor` run on threads,
so the loop, the outcomes and the executor are tested in milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import ray

if TYPE_CHECKING:
    from orchestrator.core.checkpoints import Checkpoint
    from transfer import ContentStore

__all__ = ["RAY", "RayBackend", "actor_options", "content_store", "kill", "ray_demand"]


def actor_options(resources: Mapping[str, float]) -> dict[str, Any]:
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


def kill(actor: Any) -> None:
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # already gone, or Ray is shutting down
        pass


def ray_demand(resources: Mapping[str, float], trials: int) -> dict[str, float]:
    """What an actor for ``trials`` trials asking ``resources`` reserves, in Ray's names."""
    options = actor_options({k: v * trials for k, v in resources.items()})
    demand = {"CPU": float(options["num_cpus"])}
    if "num_gpus" in options:
        demand["GPU"] = float(options["num_gpus"])
    if "memory" in options:
        demand["memory"] = float(options["memory"])
    demand.update(options.get("resources", {}))
    return {k: v for k, v in demand.items() if v > 0}


class RayBackend(Protocol):
    """What the engine calls Ray for (see the module docstring). ``trial_actor`` and
    ``persister`` are remote classes (``.options(**options).remote(*args)`` gives an
    actor handle whose methods' ``.remote(...)`` give refs with ``.future()``)."""

    @property
    def trial_actor(self) -> Any: ...

    @property
    def persister(self) -> Any: ...

    def kill(self, actor: Any) -> None: ...

    def cancel(self, ref: Any) -> None:
        """Cancel an actor call that has not started (one that runs goes on)."""
        ...

    def available_resources(self) -> Mapping[str, float]: ...

    def cluster_resources(self) -> Mapping[str, float]: ...

    def nodes(self) -> Sequence[Mapping[str, Any]]: ...

    async def find_visible(self, ckpt: Checkpoint, skip: str | None) -> str | None:
        """The first live node other than ``skip`` that sees ``ckpt`` on its disk."""
        ...

    async def copy_dir(self, source: str, ckpt: Checkpoint, target: str, staged: str) -> None:
        """Copy checkpoint ``ckpt`` (its ``path``) of node ``source`` to ``staged`` on
        node ``target``, taking what the target's blob store holds from there."""
        ...

    async def delete_where_visible(self, root: str, ckpt: Checkpoint) -> bool:
        """Delete ``ckpt`` (of storage ``root``) on the live nodes that see it; whether
        any did."""
        ...


class _Ray:
    """Ray itself: :data:`RAY`."""

    @property
    def trial_actor(self) -> Any:
        from orchestrator.actor.trial_actor import RemoteTrialActor

        return RemoteTrialActor

    @property
    def persister(self) -> Any:
        from orchestrator.actor.persister import RemotePersister

        return RemotePersister

    def kill(self, actor: Any) -> None:
        kill(actor)

    def cancel(self, ref: Any) -> None:
        try:
            ray.cancel(ref)
        except Exception:  # done already, or its actor is gone: nothing to cancel
            pass

    def available_resources(self) -> Mapping[str, float]:
        return ray.available_resources()

    def cluster_resources(self) -> Mapping[str, float]:
        return ray.cluster_resources()

    def nodes(self) -> Sequence[Mapping[str, Any]]:
        return ray.nodes()  # type: ignore[no-any-return]

    async def find_visible(self, ckpt: Checkpoint, skip: str | None) -> str | None:
        from orchestrator.engine.node_local import find_visible

        return await find_visible(ckpt, skip=skip)

    async def copy_dir(self, source: str, ckpt: Checkpoint, target: str, staged: str) -> None:
        import transfer  # imported here: trial workers that import the engine skip it

        assert ckpt.path is not None
        # Never hard links (same node): ``staged`` is handed to user code.
        await transfer.copy_dir(
            source, ckpt.path, target, staged, hardlink=False, content_store=content_store(ckpt)
        )

    async def delete_where_visible(self, root: str, ckpt: Checkpoint) -> bool:
        from orchestrator.engine.node_local import delete_where_visible

        return await delete_where_visible(root, ckpt)


#: Ray itself, the engine's default backend.
RAY: RayBackend = _Ray()


def content_store(ckpt: Checkpoint) -> ContentStore | None:
    """The blob store of ``ckpt``'s local storage (``<root>/.blobs/sha256`` on whichever
    node looks) and its files' SHA-256, for ``transfer.copy_dir``; None when the
    checkpoint's path or manifest is unknown."""
    from storage.blobs_local import blob_dir
    from transfer import ContentStore

    path, manifest = ckpt.path, ckpt.manifest
    suffix = "/" + ckpt.key
    if path is None or manifest is None or not path.endswith(suffix):
        return None
    files = manifest.get("files") or []
    digests = tuple((str(f["path"]), str(f["sha256"])) for f in files if "sha256" in f)
    return ContentStore(blob_dir(path[: -len(suffix)]), digests)
