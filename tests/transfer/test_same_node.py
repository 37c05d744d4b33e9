"""Same-node copies (the function the Ray task runs), without Ray."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from transfer.errors import SizeLimitExceeded, TransferError
from transfer.file_writer import DIRECT_MIN_SIZE
from transfer.same_node import copy_local

from .helpers import make_tree, siblings, snapshot


@pytest.mark.parametrize("hardlink", [True, False])
def test_local_copy_matches_and_links_only_when_asked(tmp_path: Path, hardlink: bool) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src, big_size=DIRECT_MIN_SIZE + 1234)  # the O_DIRECT path, ragged tail
    result = copy_local(str(src), str(dst), "t", hardlink=hardlink)
    assert snapshot(dst) == snapshot(src)
    assert result.files_sent == 6 and result.files_linked == (6 if hardlink else 0)
    same_inode = os.stat(src / "big.bin").st_ino == os.stat(dst / "big.bin").st_ino
    assert same_inode is hardlink
    assert siblings(dst) == []


def test_local_delta_mirror_and_limits(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src)
    copy_local(str(src), str(dst), "t", hardlink=False)
    (dst / "extra").write_text("x")
    again = copy_local(str(src), str(dst), "t", hardlink=False)
    assert (again.files_sent, again.files_skipped) == (0, 6) and (dst / "extra").exists()
    mirrored = copy_local(str(src), str(dst), "t", mirror=True)
    assert mirrored.files_deleted == 1 and snapshot(dst) == snapshot(src)
    (src / "big2.bin").write_bytes(b"x" * 1000)
    with pytest.raises(SizeLimitExceeded):
        copy_local(str(src), str(dst), "t", max_size=999)
    assert not (dst / "big2.bin").exists() and siblings(dst) == []


def test_copy_into_itself_is_refused(tmp_path: Path) -> None:
    make_tree(tmp_path / "src")
    with pytest.raises(TransferError, match="contains"):
        copy_local(str(tmp_path / "src"), str(tmp_path / "src" / "inner"), "t")
    with pytest.raises(TransferError, match="contains"):
        copy_local(str(tmp_path / "src"), str(tmp_path / "src"), "t")
