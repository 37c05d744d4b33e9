"""Listing and the delta decision, without Ray."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from transfer.delta import make_plan, needs_checksum
from transfer.errors import TransferError, UnsafePathError
from transfer.listing import Entry, EntryKind, is_excluded, scan

from .helpers import UNICODE_NAME, make_tree


def f(path: str, size: int = 1, mtime: int = 100) -> Entry:
    return Entry(path, EntryKind.FILE, size, mtime)


def test_scan_lists_the_tree_without_following_links(tmp_path: Path) -> None:
    make_tree(tmp_path)
    entries = {e.path: e for e in scan(str(tmp_path))}
    assert entries["a"].kind is EntryKind.DIR
    assert entries["empty-dir"].kind is EntryKind.DIR
    assert entries["a/empty.bin"].size == 0
    assert entries[f"a/{UNICODE_NAME}"].kind is EntryKind.FILE
    assert entries["latest.json"] == Entry(
        "latest.json",
        EntryKind.SYMLINK,
        0,
        entries["latest.json"].mtime_ns,
        entries["latest.json"].mode,
        "a/b/small.json",
    )
    assert entries["exec.sh"].mode == 0o755
    assert [e.path for e in scan(str(tmp_path))] == sorted(entries)


def test_scan_rejects_special_files_and_missing_roots(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(UnsafePathError, match="FIFO"):
        scan(str(tmp_path))
    assert scan(str(tmp_path), ["pipe"]) == []
    with pytest.raises(TransferError, match="does not exist"):
        scan(str(tmp_path / "nope"))
    assert scan(str(tmp_path / "nope"), missing_ok=True) == []


def test_exclude_patterns() -> None:
    assert is_excluded("a/b/x.tmp", ["*.tmp"])
    assert not is_excluded("a/b/x.tmp", ["a/*.txt"])
    assert is_excluded("logs/today/x", ["logs/*"])
    assert not is_excluded("other/logs/x", ["logs/*"])


def test_scan_prunes_excluded_directories(tmp_path: Path) -> None:
    make_tree(tmp_path)
    paths = [e.path for e in scan(str(tmp_path), ["b", "*.bin"])]
    assert "a/b" not in paths and "a/b/small.json" not in paths
    assert "big.bin" not in paths and "a/empty.bin" not in paths
    assert "a" in paths


def test_without_delta_everything_is_sent() -> None:
    src = [f("x"), f("y")]
    plan = make_plan(src, src, delta=False)
    assert [e.path for e in plan.send] == ["x", "y"] and plan.keep == ()


def test_delta_keeps_files_with_equal_size_and_mtime() -> None:
    src = [f("same"), f("grown", size=2), f("new")]
    dst = [f("same"), f("grown", size=1)]
    plan = make_plan(src, dst)
    assert [e.path for e in plan.send] == ["grown", "new"]
    assert [e.path for e in plan.keep] == ["same"]
    assert plan.bytes_to_send == 3


def test_same_size_new_mtime_is_decided_by_checksum() -> None:
    src = [f("touched", mtime=200), f("edited", mtime=200), f("same")]
    dst = [f("touched", mtime=100), f("edited", mtime=100), f("same")]
    assert needs_checksum(src, dst) == ["touched", "edited"]
    assert needs_checksum(src, dst, always_checksum=True) == ["touched", "edited", "same"]
    plan = make_plan(
        src,
        dst,
        source_digests={"touched": b"1", "edited": b"2"},
        target_digests={"touched": b"1", "edited": b"3"},
    )
    assert [e.path for e in plan.send] == ["edited"]
    assert {e.path for e in plan.keep} == {"touched", "same"}


def test_missing_digest_means_send() -> None:
    plan = make_plan([f("x", mtime=2)], [f("x", mtime=1)])
    assert [e.path for e in plan.send] == ["x"]


def test_always_checksum_catches_equal_stats_different_bytes() -> None:
    plan = make_plan(
        [f("x")],
        [f("x")],
        always_checksum=True,
        source_digests={"x": b"a"},
        target_digests={"x": b"b"},
    )
    assert [e.path for e in plan.send] == ["x"]


def test_mirror_lists_what_disappears() -> None:
    src = [Entry("d", EntryKind.DIR), f("d/x")]
    dst = [
        Entry("d", EntryKind.DIR),
        f("d/x"),
        f("d/old"),
        Entry("gone", EntryKind.DIR),
        f("gone/y"),
    ]
    assert make_plan(src, dst).deleted == ()
    assert make_plan(src, dst, mirror=True).deleted == ("d/old", "gone/y")


def test_a_directory_replacing_a_file_is_not_kept() -> None:
    plan = make_plan([Entry("x", EntryKind.DIR), f("x/y")], [f("x")])
    assert [e.path for e in plan.dirs] == ["x"] and [e.path for e in plan.send] == ["x/y"]


def test_plan_validate_rejects_crafted_listings() -> None:
    with pytest.raises(UnsafePathError):
        make_plan([f("../evil")], []).validate()
    with pytest.raises(UnsafePathError):
        make_plan([Entry("l", EntryKind.SYMLINK, link="/etc")], []).validate()
