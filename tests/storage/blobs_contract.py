"""Content-addressed checkpoints (:mod:`storage.blobs`), as a test class the drivers
that store them (S3, GCS) subclass beside :class:`StorageContract`, with the same
``store``, ``raw`` and ``reopen`` fixtures: the layout is checked through ``raw``, not
through the driver."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from storage import MANIFEST_NAME, IntegrityError, InvalidKey, Manifest, Storage, blobs_get
from storage.blob_cache import CACHE_ENV, node_cache
from storage.blobs import CHUNK_SIZE, DEDUP_ENV, blob_key, get_chunked

from .contract import Raw, Reopen, make_tree, read_tree


def blobs_in(raw: Raw) -> set[str]:
    return {k.rsplit("/", 1)[1] for k in raw.list() if k.startswith(".blobs/")}


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


class BlobsContract:
    async def test_a_checkpoint_is_a_manifest_naming_blobs(
        self, store: Storage, raw: Raw, tmp_path: Path
    ) -> None:
        files = make_tree(tmp_path / "src", 2 * CHUNK_SIZE + 123)
        manifest = await store.put_checkpoint(tmp_path / "src", "trial/ckpt_1")
        stored = json.loads(raw.read(f"trial/ckpt_1/{MANIFEST_NAME}"))
        assert stored == manifest.to_dict()
        assert stored["version"] == 2 and stored["chunk_size"] == CHUNK_SIZE
        big = next(f for f in manifest.files if f.path == "big.bin")
        assert big.chunks is not None and len(big.chunks) == 3
        assert next(f for f in manifest.files if f.path == "sub/deep/empty").chunks == ()
        # Under the key only the manifest; every chunk once, as a blob named by its hash.
        keys = raw.list()
        assert [k for k in keys if not k.startswith(".blobs/")] == [f"trial/ckpt_1/{MANIFEST_NAME}"]
        assert sorted(k for k in keys if k.startswith(".blobs/")) == sorted(
            blob_key(sha) for sha in manifest.blobs()
        )
        for sha in manifest.blobs():
            assert hashlib.sha256(raw.read(blob_key(sha))).hexdigest() == sha
        assert Manifest.from_dict(json.loads(json.dumps(manifest.to_dict()))) == manifest
        got = await store.get_checkpoint("trial/ckpt_1", tmp_path / "dst")
        assert got == manifest
        assert read_tree(tmp_path / "dst") == files

    async def test_same_bytes_are_stored_once(
        self, store: Storage, raw: Raw, tmp_path: Path
    ) -> None:
        """Another trial's checkpoint of the same files (a PBT exploit's copy, a shared
        base model) writes no blob: HEAD finds them, or the caller knows them."""
        make_tree(tmp_path / "src", CHUNK_SIZE + 1)
        first = await store.put_checkpoint(tmp_path / "src", "a/c1")
        before = blobs_in(raw)
        written = store.blob_counts.written
        await store.put_checkpoint(tmp_path / "src", "b/c1")
        assert store.blob_counts.written == written
        assert store.blob_counts.found_present == len(first.blobs())
        await store.put_checkpoint(tmp_path / "src", "b/c2", known=first.blobs())
        assert store.blob_counts.written == written
        assert store.blob_counts.skipped_known == len(first.blobs())
        assert blobs_in(raw) == before
        for key in ("a/c1", "b/c1", "b/c2"):
            await store.get_checkpoint(key, tmp_path / key)
            assert read_tree(tmp_path / key) == read_tree(tmp_path / "src")

    async def test_a_changed_chunk_is_all_that_is_written(
        self, store: Storage, raw: Raw, tmp_path: Path
    ) -> None:
        model = bytearray(os.urandom(3 * CHUNK_SIZE))
        write_tree(tmp_path / "v1", {"model.bin": bytes(model)})
        first = await store.put_checkpoint(tmp_path / "v1", "t/c1")
        model[CHUNK_SIZE + 10 : CHUNK_SIZE + 20] = b"0123456789"  # the middle chunk
        write_tree(tmp_path / "v2", {"model.bin": bytes(model)})
        counts = store.blob_counts
        written, written_bytes = counts.written, counts.written_bytes
        second = await store.put_checkpoint(tmp_path / "v2", "t/c2", known=first.blobs())
        assert (counts.written - written, counts.written_bytes - written_bytes) == (1, CHUNK_SIZE)
        assert len(blobs_in(raw)) == 4
        assert second.files[0].chunks is not None and first.files[0].chunks is not None
        assert second.files[0].chunks[0::2] == first.files[0].chunks[0::2]
        await store.get_checkpoint("t/c2", tmp_path / "out")
        assert (tmp_path / "out" / "model.bin").read_bytes() == bytes(model)

    async def test_repeated_chunks_are_written_once(
        self, store: Storage, raw: Raw, tmp_path: Path
    ) -> None:
        chunk = os.urandom(CHUNK_SIZE)
        write_tree(tmp_path / "src", {"a": chunk * 3, "b": chunk})
        manifest = await store.put_checkpoint(tmp_path / "src", "c")
        assert store.blob_counts.written == 1 and blobs_in(raw) == manifest.blobs()
        await store.get_checkpoint("c", tmp_path / "dst")
        assert read_tree(tmp_path / "dst") == {"a": chunk * 3, "b": chunk}

    @pytest.mark.parametrize("how", ["changed", "truncated", "extended", "missing"])
    async def test_a_bad_blob_is_detected(
        self,
        store: Storage,
        raw: Raw,
        tmp_path: Path,
        how: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        monkeypatch.setenv(CACHE_ENV, "off")  # the store's blob, not the node's copy
        files = make_tree(tmp_path / "src", 3000)
        manifest = await store.put_checkpoint(tmp_path / "src", "c")
        entry = next(f for f in manifest.files if f.path == "sub/b.txt")
        assert entry.chunks is not None
        key = blob_key(entry.chunks[0])
        data = files["sub/b.txt"]
        if how == "changed":
            raw.write(key, data[:-1] + b"X")
        elif how == "truncated":
            raw.write(key, data[:10])
        elif how == "extended":
            raw.write(key, data + b"X")
        else:
            await store.delete_blobs([entry.chunks[0]])
        with pytest.raises(IntegrityError) as info:
            await store.get_checkpoint("c", tmp_path / "dst")
        message = str(info.value)
        assert "sub/b.txt" in message and message.endswith(f"[{store.uri_for('c')}]")
        assert ("missing" in message) == (how == "missing")
        assert not (tmp_path / "dst" / "sub" / "b.txt").exists()
        leftovers = [p for p in (tmp_path / "dst").rglob("*") if ".trialflow-tmp-" in p.name]
        assert leftovers == []

    async def test_full_copies_are_still_read(
        self, store: Storage, raw: Raw, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Version 1 (an experiment from before, or saved with the escape hatch) loads
        beside version 2; ``TRIALFLOW_CHECKPOINT_DEDUP=0`` writes it."""
        files = make_tree(tmp_path / "src", CHUNK_SIZE + 5)
        monkeypatch.setenv(DEDUP_ENV, "0")
        old = await store.put_checkpoint(tmp_path / "src", "t/old")
        assert old.version == 1 and old.blobs() == frozenset()
        assert sorted(raw.list()) == sorted(
            [f"t/old/{r}" for r in files] + [f"t/old/{MANIFEST_NAME}"]
        )
        assert json.loads(raw.read(f"t/old/{MANIFEST_NAME}"))["version"] == 1
        monkeypatch.delenv(DEDUP_ENV)
        new = await store.put_checkpoint(tmp_path / "src", "t/new")
        assert new.version == 2
        for key in ("t/old", "t/new"):
            await store.get_checkpoint(key, tmp_path / key)
            assert read_tree(tmp_path / key) == files

    async def test_the_blob_namespace_is_reserved(self, store: Storage) -> None:
        for call in (
            store.write_bytes(".blobs/x", b"x"),
            store.read_bytes(".blobs/sha256/ab/x"),
            store.list(".blobs"),
        ):
            with pytest.raises(InvalidKey, match="reserved for checkpoint blobs"):
                await call
        await store.write_bytes("a/.blobs/x", b"inside a key: allowed")
        await store.delete(".blobs")  # deleting all of it is allowed (overwrite=True does)

    async def test_sweep_deletes_only_blobs_no_manifest_names(
        self, store: Storage, raw: Raw, tmp_path: Path
    ) -> None:
        shared = os.urandom(CHUNK_SIZE)
        write_tree(tmp_path / "one", {"base": shared, "head": b"one"})
        write_tree(tmp_path / "two", {"base": shared, "head": b"two"})
        one = await store.put_checkpoint(tmp_path / "one", "t/c1")
        two = await store.put_checkpoint(tmp_path / "two", "t/c2")
        await store.delete_checkpoint("t/c1")  # its blobs stay: the driver collects them
        assert blobs_in(raw) == one.blobs() | two.blobs()
        orphan = hashlib.sha256(b"uploaded, then the saver crashed").hexdigest()
        raw.write(blob_key(orphan), b"uploaded, then the saver crashed")
        in_flight = hashlib.sha256(b"a save still under way").hexdigest()
        raw.write(blob_key(in_flight), b"a save still under way")
        swept = await store.sweep_orphan_blobs(keep={in_flight})
        assert sorted(swept) == sorted((one.blobs() - two.blobs()) | {orphan})
        assert blobs_in(raw) == two.blobs() | {in_flight}
        await store.get_checkpoint("t/c2", tmp_path / "out")
        assert read_tree(tmp_path / "out") == {"base": shared, "head": b"two"}

    async def test_cancelled_put_commits_nothing_and_sweep_cleans_up(
        self, store: Storage, raw: Raw, tmp_path: Path
    ) -> None:
        src = tmp_path / "src"
        write_tree(src, {f"part{i}": os.urandom(CHUNK_SIZE) for i in range(12)})
        task = asyncio.ensure_future(store.put_checkpoint(src, "c"))
        for _ in range(4000):  # until a blob is stored
            await asyncio.sleep(0.005)
            if await asyncio.to_thread(blobs_in, raw):
                break
        assert not task.done(), "the save finished before it could be cancelled"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await store.list_checkpoints() == []
        assert MANIFEST_NAME not in " ".join(raw.list())
        assert raw.orphans() == []
        stored = blobs_in(raw)
        assert stored
        assert sorted(await store.sweep_orphan_blobs()) == sorted(stored)
        assert raw.list() == []

    async def test_memory_is_bounded_by_the_budget(self, reopen: Reopen, tmp_path: Path) -> None:
        st = await reopen(max_concurrency=2)
        write_tree(tmp_path / "src", {"f": os.urandom(5 * CHUNK_SIZE)})
        peak = 0

        async def watch() -> None:
            nonlocal peak
            while True:
                peak = max(peak, st._budget.used)
                await asyncio.sleep(0)

        watcher = asyncio.ensure_future(watch())
        try:
            await st.put_checkpoint(tmp_path / "src", "c")
            await st.get_checkpoint("c", tmp_path / "dst")
        finally:
            watcher.cancel()
        assert 0 < peak <= st._budget.capacity

    async def test_a_restore_reads_the_nodes_copies_first(
        self, store: Storage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Chunks this node restored, or saved when they were stored already, are read
        from its disk, checked, instead of fetched; a damaged copy is fetched from the
        store instead, and replaced. New chunks a save uploads are not kept."""
        monkeypatch.setenv(CACHE_ENV, str(tmp_path / "node"))
        files = make_tree(tmp_path / "src", 2 * CHUNK_SIZE + 5)
        manifest = await store.put_checkpoint(tmp_path / "src", "c")
        chunks = [sha for f in manifest.files for sha in f.chunks or ()]
        assert len(set(chunks)) == len(chunks) == 6
        node = node_cache()
        assert node is not None
        assert not (tmp_path / "node").exists()  # all new: none kept
        counts = store.blob_counts

        await store.get_checkpoint("c", tmp_path / "one")  # fetched, then kept
        await store.get_checkpoint("c", tmp_path / "two")  # read here
        assert read_tree(tmp_path / "one") == read_tree(tmp_path / "two") == files
        assert (counts.fetched, counts.restored_from_node) == (6, 6)

        copy = Path(node.path(chunks[2]))
        copy.write_bytes(b"X" + copy.read_bytes()[1:])  # damaged on this node's disk
        await store.get_checkpoint("c", tmp_path / "three")
        assert read_tree(tmp_path / "three") == files
        assert (counts.fetched, counts.restored_from_node) == (7, 11)
        assert hashlib.sha256(copy.read_bytes()).hexdigest() == chunks[2]  # kept again

        # Another node saves the same bytes: found stored, so kept there.
        monkeypatch.setenv(CACHE_ENV, str(tmp_path / "other"))
        await store.put_checkpoint(tmp_path / "src", "c2")
        await store.get_checkpoint("c2", tmp_path / "four")
        assert read_tree(tmp_path / "four") == files
        assert (counts.fetched, counts.restored_from_node) == (7, 17)

    async def test_a_restore_fetches_a_bounded_window_of_chunks(
        self, store: Storage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Chunks of the whole checkpoint are fetched up to a window at once, whatever
        the files: 20 small files are 20 chunks, each a file of its own."""
        monkeypatch.setenv(CACHE_ENV, "off")
        write_tree(tmp_path / "src", {f"f{i:02d}": os.urandom(1000 + i) for i in range(20)})
        manifest = await store.put_checkpoint(tmp_path / "src", "c")
        io = store._blob_io()
        limit = blobs_get.window(io, CHUNK_SIZE)
        assert 1 <= limit <= blobs_get.WINDOW < 20
        in_flight = peak = 0
        full = asyncio.Event()

        @contextlib.asynccontextmanager
        async def held() -> AsyncIterator[None]:
            """A fetch, held until the window is full (so the peak is the window's
            bound, not the network's speed)."""
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            if in_flight >= limit:
                full.set()
            try:
                await asyncio.wait_for(full.wait(), 60)
                yield
            finally:
                in_flight -= 1

        async def read(key: str) -> bytes:
            async with held():
                return await io.read(key)

        @contextlib.asynccontextmanager
        async def read_pooled(key: str, size: int) -> AsyncIterator[memoryview]:
            assert io.read_pooled is not None
            async with held(), io.read_pooled(key, size) as view:
                yield view

        pooled = read_pooled if io.read_pooled is not None else None
        watched = dataclasses.replace(io, read=read, read_pooled=pooled)
        await get_chunked(watched, "c", manifest, str(tmp_path / "dst"))
        assert peak == limit
        assert read_tree(tmp_path / "dst") == read_tree(tmp_path / "src")

    async def test_a_cancelled_restore_leaves_nothing_behind(
        self, store: Storage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Cancelled with chunks in flight: no temporary file stays, no byte of the
        budget stays held, and the next restore of it works."""
        monkeypatch.setenv(CACHE_ENV, "off")
        files = {f"f{i}": os.urandom(CHUNK_SIZE + i) for i in range(3)}
        write_tree(tmp_path / "src", files)
        await store.put_checkpoint(tmp_path / "src", "c")
        counts = store.blob_counts
        task = asyncio.ensure_future(store.get_checkpoint("c", tmp_path / "dst"))
        for _ in range(6000):  # until a chunk has arrived
            await asyncio.sleep(0.005)
            if counts.fetched or task.done():
                break
        assert not task.done(), "the restore finished before it could be cancelled"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert [p for p in (tmp_path / "dst").rglob("*") if ".trialflow-tmp-" in p.name] == []
        assert store._budget.used == 0
        await store.get_checkpoint("c", tmp_path / "again")
        assert read_tree(tmp_path / "again") == files
