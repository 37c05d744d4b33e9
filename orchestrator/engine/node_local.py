"""Finding, and deleting, checkpoints on the nodes that can see them.

With local storage the nodes do not share, a checkpoint is where some disk holds it.
:mod:`orchestrator.actor.locality` says whether one process sees it; this module asks live
nodes, through zero-CPU Ray tasks pinned to each, in the order most likely to succeed:
the node that saved it, then nodes on the same host, then the others. A restore streams
from the first node that sees it; garbage collection deletes it there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from orchestrator.actor.locality import delete_if_visible, is_visible
from orchestrator.core.checkpoints import Checkpoint


@dataclass(frozen=True)
class LiveNode:
    node_id: str
    host: str


def _probe_here(path: str, manifest: Mapping[str, Any] | None) -> bool:
    return is_visible(path, manifest)


_remote_probe: Any = ray.remote(num_cpus=0, max_retries=0)(_probe_here)
_remote_delete: Any = ray.remote(num_cpus=0, max_retries=0)(delete_if_visible)


async def live_nodes() -> list[LiveNode]:
    """The cluster's live nodes (read from the GCS in a thread: never on the loop)."""
    nodes = await asyncio.to_thread(ray.nodes)
    return [
        LiveNode(str(n["NodeID"]), str(n.get("NodeManagerHostname") or ""))
        for n in nodes
        if n.get("Alive")
    ]


def search_order(ckpt: Checkpoint, nodes: Iterable[LiveNode], skip: str | None) -> list[str]:
    """Live node ids to ask about ``ckpt``: its saver, its host's nodes, the rest."""

    def rank(node: LiveNode) -> int:
        if node.node_id == ckpt.node_id:
            return 0
        return 1 if ckpt.host and node.host == ckpt.host else 2

    return [n.node_id for n in sorted(nodes, key=rank) if n.node_id != skip]


def _on(node_id: str) -> dict[str, Any]:
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False)}


async def find_visible(ckpt: Checkpoint, skip: str | None = None) -> str | None:
    """The first live node, in :func:`search_order`, that sees ``ckpt`` (None: none).

    Every candidate is asked at once; a node that dies while asked counts as not
    seeing it."""
    assert ckpt.path is not None
    order = search_order(ckpt, await live_nodes(), skip)
    if not order:
        return None
    manifest = dict(ckpt.manifest) if ckpt.manifest is not None else None
    refs = [_remote_probe.options(**_on(n)).remote(ckpt.path, manifest) for n in order]
    answers = await asyncio.gather(*refs, return_exceptions=True)
    for node_id, seen in zip(order, answers, strict=True):
        if seen is True:
            return node_id
    return None


async def delete_where_visible(root: str, ckpt: Checkpoint) -> bool:
    """Delete ``ckpt`` on the live nodes that see it; whether any did (False: no live
    node sees it, so there is nothing a retry could delete)."""
    manifest = dict(ckpt.manifest) if ckpt.manifest is not None else None
    for node_id in search_order(ckpt, await live_nodes(), None):
        try:
            if await _remote_delete.options(**_on(node_id)).remote(root, ckpt.key, manifest):
                return True
        except ray.exceptions.RayError:
            continue  # that node died meanwhile: ask the next
    return False
