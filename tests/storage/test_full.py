"""A full disk and a file over a size limit are permanent, said at once, and change
nothing that was stored; a storage root that is a file is named as such.

The disk is a real, small tmpfs (``tests/support/fullfs.py``: root only); the size limit is the
kernel's ``RLIMIT_FSIZE`` in a child process (``EFBIG``), which needs no root.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import storage.local as local_module
from storage import LocalStorage, NotADirectory, StorageFull, open_storage

from ..support.fullfs import fill, small_filesystem

MiB = 1 << 20
REPO = Path(__file__).resolve().parents[2]


def _tree(path: Path, files: int, size: int) -> Path:
    path.mkdir(parents=True)
    for i in range(files):
        (path / f"f{i}").write_bytes(os.urandom(size))
    return path


def _orphans(root: Path) -> list[str]:
    return [p.name for p in root.rglob("*") if ".trialflow-tmp-" in p.name]


@pytest.mark.parametrize("how", ["one thread", "file by file", "in the caller's thread"])
async def test_a_full_disk_is_said_at_once_and_changes_nothing(tmp_path: Path, how: str) -> None:
    with small_filesystem(tmp_path / "disk", 4 * MiB) as disk:
        root = disk / "store"
        root.mkdir()
        old = _tree(tmp_path / "old", 1, 1000)
        files = local_module.SMALL_FILES + 1 if how == "file by file" else 2
        new = _tree(tmp_path / "new", files, 200_000)
        st = LocalStorage(str(root))
        await st.put_checkpoint(old, "t/c1")
        filler = fill(disk, leave=64 * 1024)

        async def put() -> None:
            if how == "in the caller's thread":
                st.put_small_checkpoint(new, "t/c2")
            else:
                await st.put_checkpoint(new, "t/c2")

        with pytest.raises(StorageFull) as info:
            await put()
        message = str(info.value)
        assert "no space left on the device" in message and "free space" in message
        assert f"{root}/t/c2" in message
        assert await st.list_checkpoints() == ["t/c1"]
        await st.get_checkpoint("t/c1", tmp_path / "back")  # intact, verified
        assert not (root / "t" / "c2").exists() and _orphans(root) == []
        filler.unlink()  # space freed: the same put succeeds
        await st.put_checkpoint(new, "t/c2")
        assert await st.list_checkpoints() == ["t/c1", "t/c2"]
        await st.aclose()


def test_a_file_over_the_size_limit_is_storage_full(tmp_path: Path) -> None:
    """``EFBIG`` from the kernel's per-process file size limit, no root needed."""
    src = _tree(tmp_path / "src", 1, 1 * MiB)
    root = tmp_path / "store"
    root.mkdir()
    script = textwrap.dedent(
        f"""
        import resource, signal
        from storage import LocalStorage, StorageFull
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills us
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
        try:
            LocalStorage({str(root)!r}).put_small_checkpoint({str(src)!r}, "t/c")
        except StorageFull as err:
            print("StorageFull:", err)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    said = "StorageFull: staging a checkpoint failed: a file is too large"
    assert done.stdout.startswith(said), done.stdout + done.stderr
    assert list(root.iterdir()) in ([], [root / "t"]) and _orphans(root) == []


@pytest.mark.parametrize("create", [False, True])
async def test_a_storage_root_that_is_a_file_is_named_as_such(tmp_path: Path, create: bool) -> None:
    afile = tmp_path / "results.txt"
    afile.write_text("not a directory")
    for root, said in (
        (afile, "the storage root is a file, not a directory"),
        (afile / "exp", f"the storage root cannot be created: {afile} is a file"),
    ):
        with pytest.raises(NotADirectory) as info:
            async with open_storage(root, create=create):
                pass
        assert said in str(info.value) and str(root) in str(info.value)
        assert "Not a directory" not in str(info.value)
    assert afile.read_text() == "not a directory"
