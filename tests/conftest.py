"""Session-wide fixtures: one real Ray cluster for the whole test session, and a fake.

The cluster is a ``ray.cluster_utils.Cluster`` whose head node is the "local Ray" every
test uses; tests that need more nodes add them with ``add_node`` and the fixture removes
them afterwards. One process can be connected to one Ray cluster only, so a single
session-wide cluster is both the cheapest and the only consistent choice. It starts only
for the tests that ask for it: the engine's own logic runs on ``fake_ray``, an
in-process Ray (``tests/support/fakeray.py``), which costs nothing to start.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .support.cluster import HEAD_CPUS, wait_until_dead

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
# MLflow 3 refuses a file store unless allowed: Ray Tune's mlflow_example uses one, in
# the driver and in the trials' workers (which inherit the session cluster's env).
os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
# Content-addressed restores read the node's copies of chunks first (storage.blob_cache):
# the session keeps them in a directory of its own (its Ray workers inherit it), never
# in the user's ~/.cache, where other sessions' copies would answer for the store.
if "TRIALFLOW_BLOB_CACHE" not in os.environ:
    _BLOB_CACHE = tempfile.mkdtemp(prefix="trialflow-test-blobs-")
    os.environ["TRIALFLOW_BLOB_CACHE"] = _BLOB_CACHE
    atexit.register(shutil.rmtree, _BLOB_CACHE, ignore_errors=True)


#: Ray's node health checks, relaxed for a busy 2-core CI machine. A check that gets
#: no answer within the timeout counts as a miss, and a node is declared dead after
#: ``failure_threshold`` misses in a row: with Ray's defaults (10 s, 5 misses) a raylet
#: starved of CPU for a while was declared dead mid-test. A raylet that really died
#: refuses the check at once, so a removed node is still noticed within about
#: ``period x threshold`` (10 s).
HEALTH_CHECKS = {
    "health_check_initial_delay_ms": 2000,
    "health_check_period_ms": 1000,
    "health_check_timeout_ms": 60000,
    "health_check_failure_threshold": 10,
}

#: Ray Train V2's knobs for the Train tests, in the env of every process of the cluster
#: (Train reads them in the trial's process, its controller and workers). None changes
#: what a run does, only how soon it is seen:
#: - the controller polls its workers every 2 s by default: their reports, their end and
#:   their failures wait for the next poll (a hung poll still fails a worker only after
#:   Train's 10-minute health-check timeout, however often it polls);
#: - the preemption watcher is one more actor (process) per fit, and Train's metrics
#:   (Ray metrics in the controller and each worker) more work in each: no test drains a
#:   node or reads a metric of Train's.
TRAIN_ENV = {
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.2",
    "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0",
    "RAY_TRAIN_METRICS_ENABLED": "0",
}


#: Folders of ``tests/`` whose files share one pytest-xdist worker (``make test`` runs
#: two), one after another: each file of ``tests/train/`` starts Ray Train gangs of
#: several processes on added nodes, and two at once on 2 cores starve each other's
#: health checks. (By folder, not by name: ``tests/tune/test_ray_train_names.py`` starts
#: no gang and runs beside them.)
ONE_WORKER_GROUPS = {"ray-train": "train"}

TESTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test file is one unit of work for pytest-xdist's ``loadgroup`` (as with
    ``loadfile``: its module fixtures start once), except the files of a
    :data:`ONE_WORKER_GROUPS` folder, which are one unit together."""
    for item in items:
        folder = item.path.relative_to(TESTS).parts[0]
        group = next((g for g, name in ONE_WORKER_GROUPS.items() if folder == name), str(item.path))
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """A real multi-node-capable Ray cluster, connected for the whole session."""
    import ray
    from ray.cluster_utils import Cluster

    # Ray Train's placement-group cleaner (a detached actor each fit() starts) asks Ray's
    # state API, every second, whether the run's controller is alive, at an address it
    # finds on its own: $RAY_API_SERVER_ADDRESS, else the dashboard the Ray it detects on
    # this machine names (this one runs none: localhost:8265). Another Ray's dashboard
    # there did not know our controller, and the cleaner removed a live gang mid-run. Named
    # here, a port this process holds and never listens on: every query is refused at
    # once, as on a machine with no other Ray, and the cleaner only waits (Ray itself
    # removes the gangs of a dead controller: the driver-kill test shows it).
    refused = socket.socket()
    refused.bind(("127.0.0.1", 0))
    os.environ["RAY_API_SERVER_ADDRESS"] = f"http://127.0.0.1:{refused.getsockname()[1]}"
    os.environ.update(TRAIN_ENV)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": HEAD_CPUS,
            "object_store_memory": 256 * 1024**2,
            "include_dashboard": False,
            "_system_config": HEALTH_CHECKS,
        },
    )
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=True)
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        refused.close()


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
            ray_cluster.remove_node(node, allow_graceful=True)
    wait_until_dead([node.node_id for node in added])


@pytest.fixture
def fake_ray(tmp_path: Any) -> Iterator[Any]:
    """An in-process fake Ray of one 4-CPU node (see ``tests/support/fakeray.py``); pass it to
    ``Orchestrator(_ray_backend=...)``. Its actors die with the test."""
    from .support.fakeray import FakeRay

    fake = FakeRay(tmp_path / "nodes")
    yield fake
    fake.close()


@pytest.fixture(autouse=True)
def _working_directory_kept() -> Iterator[None]:
    """A test that runs a facade trial in this process enters the trial's directory, as
    Tune does; Ray starts later workers in the driver's working directory, so one left
    elsewhere would keep them from importing ``tests``. Every test ends where it began."""
    before = os.getcwd()
    yield
    if os.getcwd() != before:
        os.chdir(before)
