"""Session-wide fixtures: one real Ray cluster for the whole test session.

The cluster is a ``ray.cluster_utils.Cluster`` whose head node is the "local Ray" every
test uses; tests that need more nodes add them with ``add_node`` and the fixture removes
them afterwards. One process can be connected to one Ray cluster only, so a single
session-wide cluster is both the cheapest and the only consistent choice.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

HEAD_CPUS = 4


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """A real multi-node-capable Ray cluster, connected for the whole session."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": HEAD_CPUS,
            "object_store_memory": 256 * 1024**2,
            "include_dashboard": False,
        },
    )
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=True)
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture
def ray_local(ray_cluster: Any) -> Any:
    """Ray is initialised (the session cluster's head node)."""
    return ray_cluster


@pytest.fixture
def add_node(ray_cluster: Any) -> Iterator[Callable[..., Any]]:
    """Add worker nodes to the session cluster; they are removed after the test.

    Returns the ``Node``; its id is ``node.node_id``. Pass ``wait=True`` (default) to
    wait until the new node is registered.
    """
    added: list[Any] = []

    def _add(*, wait: bool = True, **node_args: Any) -> Any:
        node_args.setdefault("num_cpus", 2)
        node_args.setdefault("object_store_memory", 256 * 1024**2)
        node = ray_cluster.add_node(**node_args)
        added.append(node)
        if wait:
            ray_cluster.wait_for_nodes()
        return node

    yield _add
    for node in added:
        if node in ray_cluster.worker_nodes:
            ray_cluster.remove_node(node, allow_graceful=False)
