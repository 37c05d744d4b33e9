"""The node's persister on S3 (moto), with real Ray: it closes its storage client before
the driver kills it, so its worker's log does not report the client's session left
open ("Unclosed client session", aiohttp's note from a collected session)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import ray

from orchestrator import Orchestrator, TrialState

from ..support.servers import (  # noqa: F401 - the fixtures
    BUCKET,
    aws_env,
    moto_url,
    s3_runtime_env,
    unique_prefix,
)
from ..support.trainables import counting

pytestmark = pytest.mark.usefixtures("ray_local")

PERSISTER = ":actor_name:CheckpointPersister"


def persister_logs() -> dict[str, Path]:
    """The worker logs (stderr) of this Ray session's persisters, by file name (Ray
    moves a dead worker's log into ``old/``)."""
    logs = Path(ray._private.worker._global_node.get_logs_dir_path())
    found: dict[str, Path] = {}
    for path in [*logs.glob("worker-*.err"), *logs.glob("old/worker-*.err")]:
        try:
            if PERSISTER in path.read_text(errors="replace"):
                found[path.name] = path
        except FileNotFoundError:  # moved to old/ meanwhile: found there
            continue
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_the_persister_closes_its_s3_client_before_it_is_killed(moto_url: str) -> None:  # noqa: F811
    before = set(persister_logs())
    async with Orchestrator(
        storage=f"s3://{BUCKET}/{unique_prefix()}",
        name="persist",
        storage_options={"endpoint_url": moto_url},
        runtime_env=s3_runtime_env(),
    ) as orch:
        # Too many files for the actor to upload: the node's persister does.
        trial = orch.add_trial(
            counting, {"every": 2, "padding_files": 12}, stop={"count": 4}, resources={"cpu": 0.25}
        )
        await orch.run()
    assert trial.state is TrialState.TERMINATED, trial.error
    assert [c.iteration for c in trial.checkpoints] == [2, 4]
    new = {name: path for name, path in persister_logs().items() if name not in before}
    assert len(new) == 1, new  # this run's persister
    (name,) = new
    pid = int(name.removesuffix(".err").rsplit("-", 1)[1])
    for _ in range(600):  # its process has ended: its log is complete
        if not alive(pid):
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail(f"the persister (pid {pid}) outlived its experiment by a minute")
    text = persister_logs()[name].read_text(errors="replace")
    assert "Unclosed client session" not in text, text
