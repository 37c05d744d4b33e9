"""The contract on local directories, plus what only a filesystem has: paths, file://
URIs, the staged-then-renamed checkpoint, and a missing root."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import storage.local as local_module
from storage import (
    MANIFEST_NAME,
    BucketNotFound,
    IntegrityError,
    InvalidKey,
    LocalStorage,
    NotFound,
    Storage,
    StorageError,
    open_storage,
)

from .contract import MiB, Reopen, StorageContract, make_tree, read_tree


class LocalRaw:
    def __init__(self, root: Path) -> None:
        self.root = root

    def read(self, key: str) -> bytes:
        return (self.root / key).read_bytes()

    def write(self, key: str, data: bytes) -> None:
        p = self.root / key
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)

    def list(self) -> list[str]:
        """Every file but the blobs (a checkpoint's files are links to them)."""
        rels = (p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file())
        return sorted(rel for rel in rels if not rel.startswith(".blobs/"))

    def orphans(self) -> list[str]:
        return [p.as_posix() for p in self.root.rglob("*") if ".trialflow-tmp-" in p.name]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    return r


class TestLocal(StorageContract):
    scheme = "file"
    big_size = 12 * MiB + 123
    uses_budget = False

    @pytest.fixture
    async def store(self, root: Path) -> AsyncIterator[Storage]:
        async with open_storage(root, part_size=5 * MiB) as st:
            yield st

    @pytest.fixture
    def raw(self, root: Path) -> LocalRaw:
        return LocalRaw(root)

    @pytest.fixture
    async def reopen(self, root: Path) -> AsyncIterator[Reopen]:
        opened: list[Storage] = []

        async def make(**options: object) -> Storage:
            st = open_storage(root, **{"part_size": 5 * MiB, **options})
            await st.open()
            opened.append(st)
            return st

        yield make
        for st in opened:
            await st.aclose()


async def test_file_uri_and_paths(root: Path) -> None:
    async with open_storage(f"file://{root}") as st:
        assert isinstance(st, LocalStorage)
        assert st.uri == str(root)
        assert st.uri_for("a/b") == os.path.join(root, "a", "b")
        await st.write_bytes("a/b", b"x")
        assert (root / "a" / "b").read_bytes() == b"x"


async def test_missing_root_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(BucketNotFound) as info:
        async with open_storage(tmp_path / "absent"):
            pass
    assert str(tmp_path / "absent") in str(info.value)
    async with open_storage(tmp_path / "absent", create=True) as st:
        await st.write_bytes("k", b"v")
    assert (tmp_path / "absent" / "k").read_bytes() == b"v"


async def test_checkpoint_appears_in_one_rename(root: Path, tmp_path: Path) -> None:
    """While a checkpoint is being written, its directory does not exist at all."""
    make_tree(tmp_path / "src", 8 * MiB)
    seen_partial = False

    async with open_storage(root) as st:
        task = asyncio.ensure_future(st.put_checkpoint(tmp_path / "src", "t/c"))
        while not task.done():
            if (root / "t" / "c").exists() and not (root / "t" / "c" / "big.bin").exists():
                seen_partial = True
            await asyncio.sleep(0)
        await task
        assert not seen_partial
        assert [p.name for p in (root / "t").iterdir()] == ["c"]


def _is_small(src: Path) -> bool:
    files = [p for p in src.rglob("*") if p.is_file()]
    return len(files) <= local_module.SMALL_FILES and (
        sum(p.stat().st_size for p in files) <= local_module.SMALL_BYTES
    )


async def test_small_checkpoint_staged_in_one_thread_is_the_same(
    root: Path, tmp_path: Path
) -> None:
    """A small checkpoint takes the one-thread path; what it commits is what the
    per-file path commits: every file, its manifest, one rename."""
    files = make_tree(tmp_path / "src", 1 * MiB)
    assert _is_small(tmp_path / "src")
    async with open_storage(root) as st:
        manifest = await st.put_checkpoint(tmp_path / "src", "t/c")
        assert sorted(e.path for e in manifest.files) == sorted(files)
        assert await st.list_checkpoints("t") == ["t/c"]
        await st.get_checkpoint("t/c", tmp_path / "back")
    assert read_tree(tmp_path / "back") == files
    assert not LocalRaw(root).orphans()


async def test_cancelled_small_put_leaves_nothing(root: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "state.bin").write_bytes(os.urandom(local_module.SMALL_BYTES - 1))
    assert _is_small(src)
    raw = LocalRaw(root)
    cancelled = 0
    async with open_storage(root) as st:
        for attempt in range(20):  # until one cancel lands while staging is under way
            task = asyncio.ensure_future(st.put_checkpoint(src, f"t/c{attempt}"))
            while not task.done() and not raw.orphans():
                await asyncio.sleep(0)
            if task.done():
                await task
                continue
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            cancelled += 1
            assert not (root / "t" / f"c{attempt}").exists()
            assert raw.orphans() == []
            break
        assert cancelled == 1, "every small put finished before it could be cancelled"
        await st.put_checkpoint(src, "t/after")
        assert "t/after" in await st.list_checkpoints("t")


async def test_put_small_checkpoint_commits_in_the_calling_thread(
    root: Path, tmp_path: Path
) -> None:
    """The synchronous put commits what ``put_checkpoint`` would, readable through the
    async API, and declines (writing nothing) a checkpoint too big for it."""
    files = make_tree(tmp_path / "src", 1 * MiB)
    st = LocalStorage(str(root))
    manifest = st.put_small_checkpoint(tmp_path / "src", "t/c")
    assert manifest is not None
    assert sorted(e.path for e in manifest.files) == sorted(files)
    big = tmp_path / "big"
    big.mkdir()
    (big / "state.bin").write_bytes(b"x" * (local_module.SMALL_BYTES + 1))
    assert st.put_small_checkpoint(big, "t/big") is None
    async with st:
        assert await st.list_checkpoints("t") == ["t/c"]
        assert await st.read_manifest("t/c") == manifest
        await st.get_checkpoint("t/c", tmp_path / "back")
    assert read_tree(tmp_path / "back") == files
    assert not LocalRaw(root).orphans()


async def test_get_small_checkpoint_reads_in_the_calling_thread(root: Path, tmp_path: Path) -> None:
    """The synchronous get writes what ``get_checkpoint`` would, verified; it declines a
    checkpoint too big for it and names a missing or corrupted one."""
    files = make_tree(tmp_path / "src", 1 * MiB)
    big = tmp_path / "big"
    big.mkdir()
    (big / "state.bin").write_bytes(b"x" * (local_module.SMALL_BYTES + 1))
    st = LocalStorage(str(root))
    async with st:
        manifest = await st.put_checkpoint(tmp_path / "src", "t/c")
        await st.put_checkpoint(big, "t/big")
    assert st.get_small_checkpoint("t/c", tmp_path / "back") == manifest
    assert read_tree(tmp_path / "back") == files
    assert st.get_small_checkpoint("t/big", tmp_path / "big-back") is None
    assert not (tmp_path / "big-back").exists()
    with pytest.raises(NotFound):
        st.get_small_checkpoint("t/none", tmp_path / "none")
    victim = sorted(files)[0]
    (root / "t" / "c" / victim).write_bytes(b"changed")
    with pytest.raises(IntegrityError):
        st.get_small_checkpoint("t/c", tmp_path / "again")


def test_put_small_checkpoint_reports_bad_input_like_put_checkpoint(
    root: Path, tmp_path: Path
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / MANIFEST_NAME).write_text("{}")
    with pytest.raises(InvalidKey):
        LocalStorage(str(root)).put_small_checkpoint(tmp_path / "src", "t/c")
    with pytest.raises(BucketNotFound):
        LocalStorage(str(tmp_path / "absent")).put_small_checkpoint(tmp_path / "src", "t/c")
    assert LocalRaw(root).list() == []


def test_failed_small_put_leaves_nothing(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A put that fails once its files are staged (here: writing the manifest) leaves
    neither a checkpoint nor its staging directory."""
    make_tree(tmp_path / "src", 1 * MiB)
    st = LocalStorage(str(root))

    def no_manifest(*args: object) -> None:
        raise StorageError("disk full", uri=st.uri)

    monkeypatch.setattr(st, "_finish_stage", no_manifest)
    with pytest.raises(StorageError, match="disk full"):
        st.put_small_checkpoint(tmp_path / "src", "t/c")
    assert LocalRaw(root).list() == [] and not LocalRaw(root).orphans()
