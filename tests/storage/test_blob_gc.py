"""Content-addressed checkpoints on S3 (moto_server) from the orchestrator's side: a save
that follows another checkpoint uploads nothing it names, the driver's collector deletes
a blob only when no kept checkpoint names it, a save that raced with a collection is
caught, and orphans are swept. The blobs are counted by listing the bucket."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.actor.io import ActorIO
from orchestrator.core.checkpoints import Checkpoint
from orchestrator.engine.blob_refs import BlobRefs
from orchestrator.engine.collector import CheckpointCollector
from orchestrator.errors import BlobCollected
from storage import Storage, open_storage
from storage.blobs import CHUNK_SIZE, blob_key

from ..support.servers import BUCKET, boto3_client, unique_prefix

MiB = 1 << 20


def blobs_on_s3(moto_url: str, prefix: str) -> set[str]:
    s3 = boto3_client(moto_url)
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=f"{prefix}/.blobs/"
    ):
        keys += [o["Key"] for o in page.get("Contents", ())]
    return {k.rsplit("/", 1)[1] for k in keys}


def model(root: Path, frozen: bytes, head: bytes) -> str:
    """A checkpoint directory: a part that never changes and one that does."""
    root.mkdir(parents=True)
    (root / "backbone.bin").write_bytes(frozen)
    (root / "head.bin").write_bytes(head)
    return str(root)


@pytest.fixture
def prefix() -> str:
    return unique_prefix()


@pytest.fixture
async def store(moto_url: str, prefix: str) -> AsyncIterator[Storage]:
    async with open_storage(f"s3://{BUCKET}/{prefix}", endpoint_url=moto_url) as st:
        yield st


def ckpt(trial: str, key: str, manifest: Any) -> Checkpoint:
    return Checkpoint(trial, 1, key, f"s3://{key}", manifest=dict(manifest.to_dict()))


# -- the workers' side: what a save uploads --------------------------------------------


def test_an_exploit_or_a_restore_from_another_trial_uploads_no_byte(
    moto_url: str, prefix: str, tmp_path: Path
) -> None:
    """Trial b restores trial a's checkpoint (a PBT exploit) and saves it again: its
    persister, told what the save follows, neither uploads nor looks for a blob."""
    uri, options = f"s3://{BUCKET}/{prefix}", {"endpoint_url": moto_url}
    frozen, head = os.urandom(2 * CHUNK_SIZE), os.urandom(MiB)
    donor, actor, persister = ActorIO(uri, options), ActorIO(uri, options), ActorIO(uri, options)
    try:
        donor.persist("a", model(tmp_path / "a1", frozen, head), "a/c1", 30)
        stored = blobs_on_s3(moto_url, prefix)
        assert len(stored) == 3
        restored = actor.fetch("a/c1", str(tmp_path / "b-restored"))
        assert (Path(restored) / "backbone.bin").read_bytes() == frozen
        saved = model(tmp_path / "b1", frozen, head)
        manifest = persister.persist("b", saved, "b/c1", 30, follows=("a/c1",))
        counts = persister._open().blob_counts
        assert (counts.written, counts.found_present, counts.skipped_known) == (0, 0, 3)
        assert blobs_on_s3(moto_url, prefix) == stored
        assert manifest["version"] == 2
        # The next save of b changes its head only: that chunk is all that goes up.
        persister.persist("b", model(tmp_path / "b2", frozen, b"new head"), "b/c2", 30, ("b/c1",))
        assert (counts.written, counts.written_bytes, counts.found_present) == (1, 8, 0)
        # Without a hint (another node's persister), a HEAD finds each blob: no upload.
        other = ActorIO(uri, options)
        try:
            other.persist("c", model(tmp_path / "c1", frozen, head), "c/c1", 30)
            theirs = other._open().blob_counts
            assert (theirs.written, theirs.found_present) == (0, 3)
        finally:
            other.close()
    finally:
        for io in (donor, actor, persister):
            io.close()


# -- the driver's side: reference counts -----------------------------------------------


async def test_deleting_a_checkpoint_keeps_the_blobs_a_kept_one_names(
    store: Storage, moto_url: str, prefix: str, tmp_path: Path
) -> None:
    frozen = os.urandom(CHUNK_SIZE)
    c1 = await store.put_checkpoint(model(tmp_path / "1", frozen, b"one"), "t/c1")
    c2 = await store.put_checkpoint(model(tmp_path / "2", frozen, b"two"), "t/c2")
    collector = CheckpointCollector(store)
    for key, manifest in (("t/c1", c1), ("t/c2", c2)):
        collector.refs.save_started(key)
        assert collector.refs.save_ended(key, manifest.to_dict()) == frozenset()
        collector.refs.hold(key, manifest.to_dict())
    collector.submit((ckpt("t", "t/c1", c1),))
    await collector.drain()
    assert blobs_on_s3(moto_url, prefix) == c2.blobs()  # "one" went, the backbone stayed
    await store.get_checkpoint("t/c2", tmp_path / "out")
    assert (tmp_path / "out" / "backbone.bin").read_bytes() == frozen
    collector.submit((ckpt("t", "t/c2", c2),))
    await collector.drain()
    assert blobs_on_s3(moto_url, prefix) == set()
    assert await store.list_checkpoints() == []


async def test_a_save_under_way_keeps_the_blobs_it_names(
    store: Storage, moto_url: str, prefix: str, tmp_path: Path
) -> None:
    """A save found blob X stored (the only kept checkpoint naming X is then collected):
    the collector waits for that save before it deletes X; the save's manifest names X,
    holds it again, and X stays."""
    shared = os.urandom(CHUNK_SIZE)
    old = await store.put_checkpoint(model(tmp_path / "old", shared, b"old"), "a/c1")
    collector = CheckpointCollector(store)
    collector.refs.hold("a/c1", old.to_dict())
    collector.refs.save_started("b/c1")  # the save finds X present ...
    new = await store.put_checkpoint(model(tmp_path / "new", shared, b"new"), "b/c1")
    collector.submit((ckpt("a", "a/c1", old),))  # ... a/c1 goes while it runs
    while await store.list_checkpoints("a"):
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # the collector now waits for the save
    assert blobs_on_s3(moto_url, prefix) == old.blobs() | new.blobs()
    assert collector.refs.save_ended("b/c1", new.to_dict()) == frozenset()  # no suspect
    collector.refs.hold("b/c1", new.to_dict())  # as the loop does with its SaveDone
    await collector.drain()
    assert blobs_on_s3(moto_url, prefix) == new.blobs()  # a/c1's own blob went, X stayed
    await store.get_checkpoint("b/c1", tmp_path / "out")


async def test_a_save_naming_a_blob_deleted_while_it_ran_is_caught(
    store: Storage, moto_url: str, prefix: str, tmp_path: Path
) -> None:
    """The window left: a save that started while X's DELETE was under way and found X
    still there. The driver checks X and drops the save and its manifest; had X
    been stored again meanwhile, the save would count."""
    shared = os.urandom(CHUNK_SIZE)
    collector = CheckpointCollector(store)
    collector.refs.save_started("b/c1")
    racing = await store.put_checkpoint(model(tmp_path / "new", shared, b"new"), "b/c1")
    x = racing.files[0].chunks[0]  # type: ignore[index]
    collector.refs.deleting({x})  # the collector's DELETE of X, under way ...
    await store.delete_blobs({x})
    collector.refs.deleted({x})  # ... and done
    suspects = collector.refs.save_ended("b/c1", racing.to_dict())
    assert suspects == frozenset({x})
    with pytest.raises(BlobCollected) as caught:  # not a storage fault: says what happened
        await collector.check_save("b/c1", racing.to_dict(), suspects)
    assert str(caught.value) == (
        f"checkpoint {store.uri}/b/c1 reused blob {x[:12]}... of an earlier checkpoint, "
        "which checkpoint garbage collection deleted while the save ran: this checkpoint "
        "is dropped, the older ones stay, and the trial saves again at its next checkpoint"
    )
    assert await store.list_checkpoints() == []  # no checkpoint names a missing blob
    # The same, where another save stored X again meanwhile: the save counts.
    collector.refs.save_started("b/c2")
    again = await store.put_checkpoint(model(tmp_path / "again", shared, b"again"), "b/c2")
    collector.refs.deleting({x})
    collector.refs.deleted({x})
    suspects = collector.refs.save_ended("b/c2", again.to_dict())
    assert suspects == frozenset({x})
    assert await collector.check_save("b/c2", again.to_dict(), suspects) == again.to_dict()


async def test_a_crash_before_the_manifest_leaves_orphans_the_next_run_sweeps(
    store: Storage, moto_url: str, prefix: str, tmp_path: Path
) -> None:
    kept = await store.put_checkpoint(model(tmp_path / "kept", os.urandom(MiB), b"k"), "t/c1")
    task = asyncio.ensure_future(
        store.put_checkpoint(model(tmp_path / "big", os.urandom(8 * CHUNK_SIZE), b"x"), "t/c2")
    )
    while len(blobs_on_s3(moto_url, prefix)) <= len(kept.blobs()):  # a chunk is up
        await asyncio.sleep(0.01)
    task.cancel()  # the saver dies before its manifest
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(blobs_on_s3(moto_url, prefix)) > len(kept.blobs())
    collector = CheckpointCollector(store)  # the next run: holds what its journal keeps
    collector.hold([ckpt("t", "t/c1", kept)])
    collector.start_sweep()
    await collector.drain()
    assert blobs_on_s3(moto_url, prefix) == kept.blobs()
    await store.get_checkpoint("t/c1", tmp_path / "out")


# -- the counts alone --------------------------------------------------------------------


def test_counts_follow_the_kept_checkpoints() -> None:
    def manifest(*chunks: str) -> dict[str, Any]:
        files = [{"path": f"f{i}", "chunks": [c]} for i, c in enumerate(chunks)]
        return {"version": 2, "files": files}

    x, y, z = "x" * 64, "y" * 64, "z" * 64
    refs = BlobRefs()
    refs.hold("c1", manifest(x, y))
    refs.hold("c2", manifest(x, z))
    refs.hold("c2", manifest(x, z))  # held twice: counted once
    refs.hold("v1", {"version": 1, "files": [{"path": "f"}]})  # a full copy names none
    assert refs.release("c1") == frozenset({y})
    assert refs.begin_delete({y}) == frozenset({y})
    refs.deleted({y})
    assert refs.count(x) == 1
    assert refs.release("c2") == frozenset({x, z})
    refs.hold("c3", manifest(z))  # a save that named z while it was doomed: z stays
    assert refs.begin_delete({x, z}) == frozenset({x})
    refs.deleted({x})
    assert refs.held() == frozenset({z})
    # A save that started before a deletion and names the blob is a suspect; one that
    # started after it is not; a deletion under way makes every save naming it one.
    refs.save_started("s1")
    refs.deleting({x})
    refs.save_started("s2")
    assert refs.save_ended("s2", manifest(x)) == frozenset({x})  # under way
    refs.save_started("s3")
    refs.deleted({x})
    refs.save_started("s4")
    assert refs.save_ended("s1", manifest(x, y)) == frozenset({x})
    assert refs.save_ended("s3", manifest(x)) == frozenset({x})
    assert refs.save_ended("s4", manifest(x)) == frozenset()
    assert refs.save_ended("s4", manifest(x)) == frozenset()  # asked again: nothing
    assert blob_key(x).endswith(x)
