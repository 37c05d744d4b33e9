"""Durability of a copy: a copy that returns is on the disk, and one whose bytes the disk
did not take fails and leaves the target as it was.

A power cut cannot be staged in a test, so the tests watch the real ``fsync`` calls (the
calls still happen) and check the order a crash-safe copy needs: every file and
directory of the new tree is synced while the target still shows the old state, and
the target's parent (the swap itself) after.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from transfer.errors import TransferError
from transfer.file_writer import DIRECT_MIN_SIZE
from transfer.same_node import copy_local

from ..support.transfer_copies import copy_in_process
from .helpers import make_tree, siblings, snapshot

Inode = tuple[int, int]


def _watch_fsync(monkeypatch: pytest.MonkeyPatch, marker: Path) -> list[tuple[Inode, bool]]:
    """Record each fsync's inode and whether ``marker`` (a file only the new tree has)
    was visible at the target when the sync returned."""
    calls: list[tuple[Inode, bool]] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        real(fd)
        calls.append(((st.st_dev, st.st_ino), os.path.lexists(marker)))

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def _inode(path: Path) -> Inode:
    st = os.lstat(path)
    return st.st_dev, st.st_ino


def _by_sink(src: Path, dst: Path) -> None:
    copy_in_process(src, dst)


def _copying(hardlink: bool) -> Callable[[Path, Path], None]:
    def copy(src: Path, dst: Path) -> None:
        copy_local(str(src), str(dst), "t", hardlink=hardlink)

    return copy


COPIES = {"sink": _by_sink, "local": _copying(False), "local-linked": _copying(True)}


@pytest.mark.parametrize("how", sorted(COPIES))
def test_every_file_and_directory_is_synced_before_the_swap_and_the_swap_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    src, dst = tmp_path / "src", tmp_path / "deep" / "dst"
    make_tree(src, big_size=DIRECT_MIN_SIZE + 4321)  # the O_DIRECT path too
    (src / "new.txt").write_text("only in the new tree")
    calls = _watch_fsync(monkeypatch, dst / "new.txt")
    COPIES[how](src, dst)
    assert snapshot(dst) == snapshot(src)
    synced_before = {inode for inode, visible in calls if not visible}
    synced_after = {inode for inode, visible in calls if visible}
    tree = [dst, *(p for p in dst.rglob("*") if not p.is_symlink())]
    assert len(tree) > 10
    missing = [str(p.relative_to(dst)) for p in tree if _inode(p) not in synced_before]
    assert missing == []
    # The swap (dst's entry in its parent) and the parent this copy created for it.
    assert {_inode(dst.parent), _inode(tmp_path)} <= synced_after


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_second_copy_syncs_what_it_sent_before_the_swap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src)
    COPIES[how](src, dst)
    # Replaced, not edited in place, as checkpoints are written (a hard-linked copy
    # shares the inode of an edited file).
    (src / "next.json").write_text('{"step": 4}')
    os.replace(src / "next.json", src / "a" / "b" / "small.json")
    (src / "new.txt").write_text("new")
    calls = _watch_fsync(monkeypatch, dst / "new.txt")
    COPIES[how](src, dst)
    assert snapshot(dst) == snapshot(src)
    synced_before = {inode for inode, visible in calls if not visible}
    for rel in ("a/b/small.json", "new.txt", ".", "a", "a/b"):
        assert _inode(dst / rel) in synced_before, rel
    assert _inode(tmp_path) in {inode for inode, visible in calls if visible}


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_file_the_disk_refuses_at_fsync_fails_the_copy_and_keeps_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A write error the kernel reports only at fsync (EIO, or ENOSPC on a thin or
    network disk) means the bytes never reached the disk: the copy must not commit."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src, big_size=DIRECT_MIN_SIZE + 4321)
    dst.mkdir()
    (dst / "big.bin").write_bytes(b"previous checkpoint")
    before = snapshot(dst)
    real = os.fsync
    big_size = os.path.getsize(src / "big.bin")

    def fsync(fd: int) -> None:
        if os.fstat(fd).st_size == big_size:
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises((TransferError, OSError)) as caught:
        COPIES[how](src, dst)
    assert "Input/output error" in str(caught.value)
    monkeypatch.undo()
    assert snapshot(dst) == before and siblings(dst) == []
