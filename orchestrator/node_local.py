"""Deleting a checkpoint that lives on another node's local disk.

With local storage that the nodes do not share, a checkpoint is on the disk of the node
whose actor saved it, so garbage collection must run there: a zero-CPU Ray task pinned
to that node deletes it through the same local driver (manifest first).
"""

from __future__ import annotations

import asyncio
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


def _delete_checkpoint_here(root: str, key: str) -> None:
    from storage import LocalStorage

    async def run() -> None:
        async with LocalStorage(root) as store:
            await store.delete_checkpoint(key)

    asyncio.run(run())


_remote_delete: Any = ray.remote(num_cpus=0, max_retries=0)(_delete_checkpoint_here)


async def delete_on_node(node_id: str, root: str, key: str) -> None:
    """Delete checkpoint ``key`` of the local storage at ``root`` on node ``node_id``."""
    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
    await _remote_delete.options(scheduling_strategy=strategy).remote(root, key)
