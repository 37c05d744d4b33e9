"""Blobs that no checkpoint names (a save or a driver killed between a chunk's upload
and the manifest) go at the next run's start and in ``repair``, and nothing a kept
checkpoint names goes with them. S3 (moto_server) under the fake Ray: the subject is
the storage."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from orchestrator import Orchestrator, TrialState
from orchestrator.api.repair import repair
from storage import open_storage
from storage.blobs import blob_key

from ..support.servers import BUCKET, boto3_client, unique_prefix
from ..support.trainables import Counter

CPU = {"cpu": 0.25}


def blobs(moto_url: str, root: str) -> set[str]:
    listed = boto3_client(moto_url).list_objects_v2(Bucket=BUCKET, Prefix=f"{root}/.blobs/")
    return {o["Key"].rsplit("/", 1)[1] for o in listed.get("Contents", ())}


def plant_orphan(moto_url: str, root: str, what: bytes) -> str:
    """A blob as a save killed before its manifest leaves it."""
    sha = hashlib.sha256(what).hexdigest()
    boto3_client(moto_url).put_object(Bucket=BUCKET, Key=f"{root}/{blob_key(sha)}", Body=what)
    return sha


async def named_by_kept(uri: str, moto_url: str, keys: list[str]) -> set[str]:
    async with open_storage(uri, endpoint_url=moto_url) as st:
        return {sha for key in keys for sha in (await st.read_manifest(key)).blobs()}


async def test_orphans_go_at_a_resumed_run_and_in_repair_and_all_with_overwrite(
    moto_url: str, fake_ray: Any
) -> None:
    prefix = unique_prefix()
    root, uri = f"{prefix}/sweep", f"s3://{BUCKET}/{prefix}/sweep"
    where: dict[str, Any] = {
        "storage": f"s3://{BUCKET}/{prefix}",
        "name": "sweep",
        "storage_options": {"endpoint_url": moto_url},
        "progress": False,
        "loggers": [],
        "keep_checkpoints": 1,
        "_ray_backend": fake_ray,
    }
    options: dict[str, Any] = {"stop": {"training_iteration": 3}, "checkpoint_every": 1}
    async with Orchestrator(**where) as orch:
        first = orch.add_trial(Counter, {"n": 1}, resources=CPU, **options)
        await orch.run()
    kept = [c.key for c in first.checkpoints]
    named = await named_by_kept(uri, moto_url, kept)
    assert named and blobs(moto_url, root) == named
    orphan = plant_orphan(moto_url, root, b"a chunk whose manifest never came")

    # A resumed run sweeps at its start (in the background, done before it ends).
    async with Orchestrator(**where, resume=True) as again:
        adopted = again.add_trial(Counter, {"n": 1}, resources=CPU, **options)
        await again.run()
    assert adopted.state is TrialState.TERMINATED
    for _ in range(200):
        if orphan not in blobs(moto_url, root):
            break
        await asyncio.sleep(0.05)
    assert blobs(moto_url, root) == named

    # So does repair, under the experiment's lease; it says how many.
    orphan = plant_orphan(moto_url, root, b"another one")
    report = await repair(where["storage"], "sweep", storage_options=where["storage_options"])
    assert report.blobs_swept == 1
    assert "deleted 1 blob(s) that no checkpoint names" in report.lines()
    assert blobs(moto_url, root) == named

    # Replacing the experiment deletes its blobs with the rest.
    async with Orchestrator(**where, overwrite=True) as fresh:
        fresh.add_trial(Counter, {"n": 2}, resources=CPU, stop={"training_iteration": 1})
        await fresh.run()
    assert not blobs(moto_url, root) & named
