"""Files the target's blob store holds are copied there from it, not sent: the plan
split on plain files, then ``copy_dir`` between two real nodes (a ``cluster_utils``
worker node shares this machine's disk, so the test sees both ends)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
import ray

import transfer
from transfer.delta import make_plan
from transfer.from_store import ContentStore, close_found, split_plan
from transfer.listing import Entry, EntryKind

from .helpers import snapshot

KiB = 1024


def blob_store(top: Path, *contents: bytes) -> Path:
    """A store of SHA-256-named files, as a local storage's ``.blobs/sha256`` is."""
    for data in contents:
        sha = hashlib.sha256(data).hexdigest()
        (top / sha[:2]).mkdir(parents=True, exist_ok=True)
        (top / sha[:2] / sha).write_bytes(data)
    return top


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_plan_sends_only_what_the_store_does_not_hold(tmp_path: Path) -> None:
    frozen, head, bad = os.urandom(100 * KiB), os.urandom(KiB), os.urandom(KiB)
    store = blob_store(tmp_path / "blobs", frozen, bad)
    (store / sha(bad)[:2] / sha(bad)).write_bytes(os.urandom(KiB))  # damaged: never trusted
    source = [
        Entry("frozen.bin", EntryKind.FILE, len(frozen)),
        Entry("head.bin", EntryKind.FILE, len(head)),
        Entry("bad.bin", EntryKind.FILE, len(bad)),
        Entry("unknown.bin", EntryKind.FILE, 5),
    ]
    digests = (("frozen.bin", sha(frozen)), ("head.bin", sha(head)), ("bad.bin", sha(bad)))
    plan, found = split_plan(make_plan(source, []), ContentStore(str(store), digests))
    try:
        assert [e.path for e in plan.send] == ["head.bin", "bad.bin", "unknown.bin"]
        assert [f.entry.path for f in found] == ["frozen.bin"]
    finally:
        close_found(found)
    same, none = split_plan(make_plan(source, []), None)
    assert none == [] and len(same.send) == 4


@pytest.mark.cluster
async def test_a_copy_takes_what_the_target_holds_from_its_store(
    add_node: Any, tmp_path: Path
) -> None:
    node = add_node(num_cpus=1, object_store_memory=96 * 1024**2)
    frozen, head = os.urandom(700 * KiB), os.urandom(64 * KiB)
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "frozen.bin").write_bytes(frozen)
    (src / "head.bin").write_bytes(head)
    store = blob_store(tmp_path / "blobs", frozen)
    digests = (("frozen.bin", sha(frozen)), ("head.bin", sha(head)))
    stats = await transfer.copy_dir(
        str(ray.get_runtime_context().get_node_id()),
        str(src),
        node.node_id,
        str(dst),
        chunk_size=64 * KiB,
        content_store=ContentStore(str(store), digests),
    )
    assert snapshot(dst) == snapshot(src)
    assert (stats.files_sent, stats.files_skipped, stats.bytes_sent) == (1, 1, len(head))
    blob = store / sha(frozen)[:2] / sha(frozen)
    assert (dst / "frozen.bin").stat().st_ino != blob.stat().st_ino  # a copy, never a link
    assert blob.stat().st_nlink == 1
