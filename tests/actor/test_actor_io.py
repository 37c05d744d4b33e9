"""A trial actor commits its small checkpoints itself when storage is a local directory.

``ActorIO`` is plain Python (the actor calls it in its own thread), so these run without
Ray: which checkpoints are committed in place, which are left for the node's persister
(nothing written, the scratch copy kept), and the switch to the persister after a slow
commit.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

import orchestrator.actor.io as actor_io
import storage.local as local_module
from orchestrator.actor.io import ActorIO
from storage import LocalStorage, StorageFull, UnsupportedFile

from ..support.fullfs import fill, small_filesystem


def _scratch(path: Path, files: int = 1, size: int = 3) -> str:
    path.mkdir(parents=True)
    for i in range(files):
        (path / f"f{i}").write_bytes(b"x" * size)
    return str(path)


async def _committed(root: Path, prefix: str) -> list[str]:
    async with LocalStorage(str(root)) as st:
        return await st.list_checkpoints(prefix)


async def test_a_small_checkpoint_is_committed_in_place(tmp_path: Path) -> None:
    io = ActorIO(str(tmp_path / "store"), {"create": True})
    local = _scratch(tmp_path / "scratch" / "c1", files=2)
    manifest = io.commit_small("t1", local, "t1/checkpoint_000001")
    assert manifest is not None
    assert sorted(e["path"] for e in manifest["files"]) == ["f0", "f1"]
    assert not Path(local).exists()  # the scratch copy is gone once committed
    assert await _committed(tmp_path / "store", "t1") == ["t1/checkpoint_000001"]


async def test_a_large_checkpoint_is_left_for_the_persister(tmp_path: Path) -> None:
    io = ActorIO(str(tmp_path / "store"), {"create": True})
    many = _scratch(tmp_path / "scratch" / "many", files=local_module.SMALL_FILES + 1)
    big = _scratch(tmp_path / "scratch" / "big", size=local_module.SMALL_BYTES + 1)
    assert io.commit_small("t1", many, "t1/a") is None
    assert io.commit_small("t1", big, "t1/b") is None
    assert Path(many).is_dir() and Path(big).is_dir()
    assert await _committed(tmp_path / "store", "t1") == []


def test_remote_storage_is_never_committed_in_place(tmp_path: Path) -> None:
    io = ActorIO("s3://bucket/prefix", {"endpoint_url": "http://127.0.0.1:9"})
    local = _scratch(tmp_path / "c")
    assert io.commit_small("t1", local, "t1/c") is None
    assert Path(local).is_dir()


def test_a_storage_error_leaves_the_checkpoint_to_the_persister(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The persister retries (or reports) storage errors; in place there is one try."""
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "t1").write_text("a file where the trial's directory goes")
    io = ActorIO(str(tmp_path / "store"), {})
    local = _scratch(tmp_path / "c")
    with caplog.at_level(logging.INFO, logger="orchestrator.actor"):
        assert io.commit_small("t1", local, "t1/c") is None
    assert Path(local).is_dir()
    assert "t1" in caplog.text and "t1/c" in caplog.text


def _commit_or_persist(io: ActorIO, attempt: str, local: str) -> None:
    if attempt == "in place":
        io.commit_small("t1", local, "t1/c")
    else:  # as the node's persister does, with a retry budget far beyond the test's
        io.persist("t1", local, "t1/c", retry_for=3600)


@pytest.mark.parametrize("odd", ["fifo", "link out"])
def test_a_file_storage_cannot_keep_is_said_at_once_not_left_to_retries(
    tmp_path: Path, odd: str
) -> None:
    """Permanent errors are raised by the in-place commit and by the persister's upload
    at once, whatever its retry budget, and the scratch copy goes (nothing will upload
    it again)."""
    io = ActorIO(str(tmp_path / "store"), {"create": True})
    for attempt in ("in place", "persister"):
        local = _scratch(tmp_path / attempt)
        if odd == "fifo":
            os.mkfifo(os.path.join(local, "pipe"))
        else:
            os.symlink("/etc/passwd", os.path.join(local, "pipe"))
        with pytest.raises(UnsupportedFile, match="'pipe' is a "):
            _commit_or_persist(io, attempt, local)
        assert not Path(local).exists()
    io.close()


def test_a_full_disk_is_said_at_once_not_left_to_retries(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "disk", 2 << 20) as disk:
        io = ActorIO(str(disk / "store"), {"create": True})
        filler = fill(disk, leave=32 * 1024)
        for attempt in ("in place", "persister"):
            local = _scratch(tmp_path / attempt, size=500_000)
            with pytest.raises(StorageFull, match="no space left on the device"):
                _commit_or_persist(io, attempt, local)
            assert not Path(local).exists()
        filler.unlink()
        io.close()


async def test_after_slow_commits_in_a_row_the_persister_takes_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    io = ActorIO(str(tmp_path / "store"), {"create": True})
    tolerated = actor_io.SLOW_COMMITS_TOLERATED
    keys = [f"t1/c{i}" for i in range(2 * tolerated)]
    monkeypatch.setattr(actor_io, "COMMIT_IN_PLACE_BUDGET_S", 0.0)  # every commit is slow
    for key in keys[: tolerated - 1]:
        assert io.commit_small("t1", _scratch(tmp_path / key), key) is not None
    monkeypatch.setattr(actor_io, "COMMIT_IN_PLACE_BUDGET_S", 60.0)  # a fast one resets
    assert io.commit_small("t1", _scratch(tmp_path / keys[tolerated - 1]), keys[tolerated - 1])
    monkeypatch.setattr(actor_io, "COMMIT_IN_PLACE_BUDGET_S", 0.0)
    for key in keys[tolerated:]:  # committed, but the last of them too slowly to go on
        assert io.commit_small("t1", _scratch(tmp_path / key), key) is not None
    after = _scratch(tmp_path / "after")
    assert io.commit_small("t1", after, "t1/after") is None
    assert Path(after).is_dir()
    assert await _committed(tmp_path / "store", "t1") == sorted(keys)
