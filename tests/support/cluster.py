"""The session cluster's size and a wait for removed nodes to be dead (the session
fixtures in ``tests/conftest.py`` and the tests that add or lose nodes use them)."""

from __future__ import annotations

#: CPUs of the session cluster's head node (the fake Ray's one node has as many).
HEAD_CPUS = 4

#: Seconds the GCS may take to notice a removed node (see ``HEALTH_CHECKS`` in
#: ``tests/conftest.py``), generously.
NODE_DEATH_TIMEOUT_S = 120.0


def wait_until_dead(node_ids: list[str]) -> None:
    """Block until the GCS reports every node in ``node_ids`` dead.

    A node killed at the end of one test (or by it) is still "alive" to the GCS until its
    health checks fail, and Ray would place the next test's actors on it: they died at
    creation ("the actor died unexpectedly"), a flaky failure of whichever test came next.
    """
    import time

    import ray

    deadline = time.monotonic() + NODE_DEATH_TIMEOUT_S
    wanted = set(node_ids)
    while wanted:
        alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        if not wanted & alive:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"nodes still alive {NODE_DEATH_TIMEOUT_S} s after removal")
        time.sleep(0.2)
