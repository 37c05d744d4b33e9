"""What the loop's stream of a checkpoint tells ``transfer.copy_dir`` about the target's
blob store: the local storage root's ``.blobs/sha256`` and the manifest's SHA-256s."""

from __future__ import annotations

from orchestrator.core.checkpoints import Checkpoint
from orchestrator.engine.ray_calls import content_store


def test_the_store_is_the_storage_roots_blobs_and_the_manifests_digests() -> None:
    manifest = {"files": [{"path": "a/w.bin", "size": 3, "sha256": "ab" * 32}]}
    ckpt = Checkpoint(
        "t1",
        5,
        "t1/checkpoint_000005",
        "file:///r/exp/t1/checkpoint_000005",
        path="/r/exp/t1/checkpoint_000005",
        manifest=manifest,
    )
    store = content_store(ckpt)
    assert store is not None
    assert store.root == "/r/exp/.blobs/sha256"
    assert store.digests == (("a/w.bin", "ab" * 32),)
    assert content_store(Checkpoint("t1", 5, "t1/c", "s3://b/t1/c")) is None
