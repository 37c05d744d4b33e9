"""Content-addressed checkpoints on a local disk: files are hard links to blobs, GC is the
link count, a crash leaves nothing referenced missing, restores copy. Real files only;
the crashes are real SIGKILLs of a child process."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from storage import InvalidKey, LocalStorage
from storage.blobs_local import STALE_AFTER_S
from storage.dedup import DEDUP_ENV, blob_key
from storage.manifest import MANIFEST_NAME

MiB = 1 << 20
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    return r


def write_model(d: Path, *, frozen: bytes, step: int, big: bool = True) -> Path:
    """A checkpoint directory: a part that never changes and one that does."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "backbone.bin").write_bytes(frozen if big else frozen[:1024])
    (d / "head.bin").write_bytes(hashlib.sha256(str(step).encode()).digest() * 4096)
    return d


def blobs(root: Path) -> dict[str, int]:
    """Each blob's name and its link count."""
    top = root / ".blobs" / "sha256"
    return (
        {p.name: p.stat().st_nlink for p in top.rglob("*") if p.is_file()} if top.exists() else {}
    )


def inode_bytes(root: Path) -> int:
    """Bytes on disk under ``root``, each inode counted once."""
    seen: dict[tuple[int, int], int] = {}
    for p in root.rglob("*"):
        if p.is_file():
            st = p.stat()
            seen[(st.st_dev, st.st_ino)] = st.st_size
    return sum(seen.values())


def verify(root: Path, key: str) -> None:
    """Every file of checkpoint ``key`` has its manifest's size and SHA-256 (read raw)."""
    import json

    d = root / key
    for e in json.loads((d / MANIFEST_NAME).read_bytes())["files"]:
        data = (d / e["path"]).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (e["size"], e["sha256"]), key


async def test_an_unchanged_file_is_stored_once(root: Path, tmp_path: Path) -> None:
    frozen = os.urandom(5 * MiB)
    async with LocalStorage(str(root)) as st:
        for step in range(3):
            src = write_model(tmp_path / f"s{step}", frozen=frozen, step=step)
            await st.put_checkpoint(src, f"trial/checkpoint_{step}")
    inodes = {(root / f"trial/checkpoint_{s}/backbone.bin").stat().st_ino for s in range(3)}
    assert len(inodes) == 1
    assert blobs(root)[hashlib.sha256(frozen).hexdigest()] == 4  # the blob and 3 checkpoints
    assert len(blobs(root)) == 4  # one backbone, three heads
    assert inode_bytes(root) < 6 * MiB
    for s in range(3):
        verify(root, f"trial/checkpoint_{s}")


async def test_dedup_off_gives_full_copies(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DEDUP_ENV, "0")
    frozen = os.urandom(MiB)
    async with LocalStorage(str(root)) as st:
        for step in range(2):
            await st.put_checkpoint(
                write_model(tmp_path / f"s{step}", frozen=frozen, step=step), f"t/c{step}"
            )
        assert st.put_small_checkpoint(write_model(tmp_path / "s2", frozen=frozen, step=2), "t/c2")
    assert not (root / ".blobs").exists()
    assert {(root / f"t/c{s}/backbone.bin").stat().st_nlink for s in range(3)} == {1}


def test_small_checkpoints_link_too_and_across_trials(root: Path, tmp_path: Path) -> None:
    """A PBT exploit (the donor's files saved under another trial) stores no bytes."""
    frozen = os.urandom(64 << 10)
    st = LocalStorage(str(root))
    src = write_model(tmp_path / "s", frozen=frozen, step=1)
    assert st.put_small_checkpoint(src, "donor/checkpoint_1") is not None
    before = inode_bytes(root)
    assert st.put_small_checkpoint(src, "taker/checkpoint_1") is not None
    assert inode_bytes(root) - before < 4096  # a manifest, no file bytes
    donor, taker = root / "donor/checkpoint_1", root / "taker/checkpoint_1"
    for name in ("backbone.bin", "head.bin"):
        assert (donor / name).stat().st_ino == (taker / name).stat().st_ino
    verify(root, "taker/checkpoint_1")


def test_first_saves_racing_with_one_content_store_it_once(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trials' first saves of one base model race: each finds no blob yet, and the one
    that publishes second links its file to the winner's blob instead of keeping its
    own copy (the race is made certain: the look for an existing blob finds none)."""
    from storage.blobs_local import LocalBlobs

    frozen = os.urandom(256 << 10)
    st = LocalStorage(str(root))
    src = write_model(tmp_path / "s", frozen=frozen, step=1)
    assert st.put_small_checkpoint(src, "a/checkpoint_1") is not None
    looks: list[str] = []
    real = LocalBlobs._link_existing

    def finds_none_first(self: LocalBlobs, blob: str, dst: str) -> bool:
        looks.append(blob)
        return False if looks.count(blob) == 1 else real(self, blob, dst)

    monkeypatch.setattr(LocalBlobs, "_link_existing", finds_none_first)
    before = inode_bytes(root)
    assert st.put_small_checkpoint(src, "b/checkpoint_1") is not None
    assert len(set(looks)) == 2 and len(looks) == 4  # both missed, both published second
    assert inode_bytes(root) - before < 4096  # a manifest, no file bytes
    for name in ("backbone.bin", "head.bin"):
        assert (root / "a/checkpoint_1" / name).stat().st_ino == (
            root / "b/checkpoint_1" / name
        ).stat().st_ino
    verify(root, "b/checkpoint_1")


async def test_delete_removes_only_the_blobs_no_one_else_holds(root: Path, tmp_path: Path) -> None:
    frozen = os.urandom(MiB)
    async with LocalStorage(str(root)) as st:
        for step in range(2):
            await st.put_checkpoint(
                write_model(tmp_path / f"s{step}", frozen=frozen, step=step), f"t/c{step}"
            )
        assert len(blobs(root)) == 3
        await st.delete_checkpoint("t/c0")
        assert not (root / "t/c0").exists()
        left = blobs(root)
        assert set(left) == {
            hashlib.sha256(frozen).hexdigest(),
            hashlib.sha256((root / "t/c1/head.bin").read_bytes()).hexdigest(),
        }
        assert set(left.values()) == {2}
        verify(root, "t/c1")
        await st.delete_checkpoint("t/c1")
    assert blobs(root) == {}


async def test_a_checkpoint_saved_again_at_its_key_releases_the_old_blobs(
    root: Path, tmp_path: Path
) -> None:
    frozen = os.urandom(MiB)
    async with LocalStorage(str(root)) as st:
        await st.put_checkpoint(write_model(tmp_path / "a", frozen=frozen, step=1), "t/c")
        await st.put_checkpoint(write_model(tmp_path / "b", frozen=frozen, step=2), "t/c")
    assert len(blobs(root)) == 2
    assert set(blobs(root).values()) == {2}
    verify(root, "t/c")


async def test_where_hard_links_fail_files_are_copied(root: Path, tmp_path: Path) -> None:
    """``.blobs`` on another filesystem (tmpfs): link() fails with EXDEV, every file is a
    full copy, and the checkpoint is as good."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(root).st_dev:
        pytest.skip("needs /dev/shm on another filesystem than the test's tmp dir")
    elsewhere = shm / f"trialflow-test-{os.getpid()}-{time.monotonic_ns()}"
    elsewhere.mkdir()
    try:
        (root / ".blobs").symlink_to(elsewhere)
        (elsewhere / "sha256").mkdir()
        frozen = os.urandom(MiB)
        async with LocalStorage(str(root)) as st:
            await st.put_checkpoint(write_model(tmp_path / "a", frozen=frozen, step=1), "t/c1")
            assert st.blobs.links_ok is False
            assert st.put_small_checkpoint(
                write_model(tmp_path / "b", frozen=frozen, step=2, big=False), "t/c2"
            )
            await st.get_checkpoint("t/c1", tmp_path / "back")
        assert (tmp_path / "back/backbone.bin").read_bytes() == frozen
        assert (root / "t/c1/backbone.bin").stat().st_nlink == 1
        assert not [p for p in elsewhere.rglob("*") if p.is_file()]
        verify(root, "t/c2")
    finally:
        import shutil

        shutil.rmtree(elsewhere, ignore_errors=True)


def test_blobs_is_a_reserved_key() -> None:
    st = LocalStorage("/nonexistent")
    for key in (".blobs", ".blobs/sha256/ab/x", blob_key("a" * 64)):
        with pytest.raises(InvalidKey, match=r"reserved for checkpoint blobs"):
            st.uri_for(key)
    assert st.uri_for("t/.blobs")  # only as the first part


async def test_restores_copy_never_link(root: Path, tmp_path: Path) -> None:
    """User code writing into a restored directory changes no checkpoint."""
    frozen = os.urandom(MiB)
    st = LocalStorage(str(root))
    st.put_small_checkpoint(
        write_model(tmp_path / "a", frozen=frozen, step=1, big=False), "t/small"
    )
    async with st:
        await st.put_checkpoint(write_model(tmp_path / "b", frozen=frozen, step=2), "t/big")
        await st.put_checkpoint(write_model(tmp_path / "c", frozen=frozen, step=2), "u/big")
        await st.get_checkpoint("t/big", tmp_path / "r_big")
    assert st.get_small_checkpoint("t/small", tmp_path / "r_small") is not None
    for restored in (tmp_path / "r_big", tmp_path / "r_small"):
        for name in ("backbone.bin", "head.bin"):
            assert (restored / name).stat().st_nlink == 1
            with open(restored / name, "r+b") as f:  # rewrite in place, as a trainable may
                f.write(b"\0" * 512)
    for key in ("t/small", "t/big", "u/big"):
        verify(root, key)


async def test_sweep_removes_unheld_blobs_and_stale_leftovers_only(
    root: Path, tmp_path: Path
) -> None:
    frozen = os.urandom(MiB)
    async with LocalStorage(str(root)) as st:
        await st.put_checkpoint(write_model(tmp_path / "a", frozen=frozen, step=1), "t/c1")
        orphan = root / blob_key("f" * 64)
        orphan.parent.mkdir(parents=True)
        orphan.write_bytes(b"nobody holds me")
        fresh_stage = root / "t" / ".trialflow-tmp-c2-000000000000"
        fresh_stage.mkdir()
        os.link(root / "t/c1/head.bin", fresh_stage / "head.bin")
        assert await st.sweep_blobs() == 1  # the orphan; the fresh stage may be a live save
        assert not orphan.exists() and fresh_stage.exists()
        assert len(blobs(root)) == 2
        old = time.time() - STALE_AFTER_S - 60
        os.utime(fresh_stage, (old, old))
        await st.delete_checkpoint("t/c1")  # head's blob: still held by the stage
        assert len(blobs(root)) == 1
        assert await st.sweep_blobs() == 1
    assert not fresh_stage.exists() and blobs(root) == {}


async def test_saves_racing_sweeps_lose_nothing(root: Path, tmp_path: Path) -> None:
    """Blobs unlinked by sweeps and deletes while saves link them: every committed
    checkpoint still reads whole (only sharing may be lost)."""
    frozen = os.urandom(256 << 10)
    st = LocalStorage(str(root), fsync=False)
    stop = threading.Event()

    def sweeper() -> None:
        while not stop.is_set():
            st.blobs.sweep()

    thread = threading.Thread(target=sweeper)
    thread.start()
    try:
        for step in range(40):
            src = write_model(tmp_path / f"s{step}", frozen=frozen, step=step % 3, big=False)
            assert st.put_small_checkpoint(src, f"t/c{step}") is not None
            if step % 2:
                st._delete_now(str(root / f"t/c{step - 1}"))
    finally:
        stop.set()
        thread.join()
    for step in range(1, 40, 2):
        verify(root, f"t/c{step}")
    st.blobs.sweep()
    for step in range(1, 40, 2):
        verify(root, f"t/c{step}")


# -- crashes: a child process killed (SIGKILL) at one point of a commit or a delete ---

CHILD = """
import os, signal, sys
sys.path.insert(0, {repo!r})
import storage.blobs_local as blobs_local
import storage.local as local
from storage import LocalStorage

root, op, key, src, point = sys.argv[1:6]

def die(*a, **k):
    os.kill(os.getpid(), signal.SIGKILL)

if point == "commit":  # every blob published, the stage complete, not renamed into place
    real_rename = os.rename
    def rename(a, b, *r, **k):
        if os.path.basename(b) == key.rsplit("/", 1)[1]:
            die()
        return real_rename(a, b, *r, **k)
    local.os.rename = rename
elif point == "publish":  # the second file's blob being published
    calls = []
    real_publish = blobs_local.LocalBlobs._publish
    def publish(self, staged, blob):
        calls.append(blob)
        if len(calls) == 2:
            die()
        return real_publish(self, staged, blob)
    blobs_local.LocalBlobs._publish = publish
elif point == "rmtree":  # the directory half removed
    real_unlink = os.unlink
    def unlink(p, *a, **k):
        real_unlink(p, *a, **k)
        if k.get("dir_fd") is not None:  # rmtree's first file
            die()
    os.unlink = unlink
elif point == "release":  # the directory gone, its blobs not yet released
    blobs_local.LocalBlobs.release = die
st = LocalStorage(root)
if op == "put":
    st.put_small_checkpoint(src, key)
else:
    import asyncio
    asyncio.run(st.delete_checkpoint(key))
sys.exit(3)  # not killed: the test's point was never reached
"""


def crash(root: Path, op: str, key: str, src: Path | None, point: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD.format(repo=str(REPO)), str(root), op, key, str(src), point],
        timeout=120,
        capture_output=True,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()


@pytest.mark.parametrize(
    ("op", "point"),
    [("put", "publish"), ("put", "commit"), ("delete", "rmtree"), ("delete", "release")],
)
async def test_a_crash_leaves_nothing_held_missing_and_the_sweep_cleans_up(
    root: Path, tmp_path: Path, op: str, point: str
) -> None:
    frozen = os.urandom(MiB)
    async with LocalStorage(str(root)) as st:
        for step in range(2):
            src = write_model(tmp_path / f"s{step}", frozen=frozen, step=step, big=False)
            assert st.put_small_checkpoint(src, f"t/c{step}")
        new = write_model(tmp_path / "new", frozen=os.urandom(MiB), step=9, big=False)
        if op == "put":
            crash(root, "put", "t/c2", new, point)
            kept = ["t/c0", "t/c1"]
        else:
            crash(root, "delete", "t/c0", None, point)
            kept = ["t/c1"]
        assert await st.list_checkpoints("") == kept
        for key in kept:
            verify(root, key)
        later = time.time() + STALE_AFTER_S + 60  # the crash's leftovers are old by then
        await st._run(None, "sweep", lambda: st.blobs.sweep(now=later))
        for key in kept:
            verify(root, key)
        held = {
            hashlib.sha256((root / k / n).read_bytes()).hexdigest()
            for k in kept
            for n in ("backbone.bin", "head.bin")
        }
        assert set(blobs(root)) == held
        assert not list(root.rglob(".trialflow-tmp-*"))
        assert inode_bytes(root) == sum((root / blob_key(h)).stat().st_size for h in held) + sum(
            (root / k / MANIFEST_NAME).stat().st_size for k in kept
        )
