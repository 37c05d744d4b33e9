"""Source and sink without Ray: a real copy in-process, and crafted input at the sink.

Frames here go straight from ``SourceReader.read`` to ``SinkWriter.write``, the same
buffers Ray would carry, so the framing, verification, O_DIRECT writing and staged
commit are all exercised without a cluster.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from transfer.checksum import CHECK_SIZE
from transfer.chunks import Piece, encode_header, header_size, layout
from transfer.delta import Plan, make_plan
from transfer.errors import TransferError, TransferIntegrityError, UnsafePathError
from transfer.file_writer import DIRECT_MIN_SIZE
from transfer.listing import Entry, EntryKind
from transfer.sink import SinkWriter
from transfer.source import SourceReader
from transfer.staging import StagedTree

from ..support.transfer_copies import copy_in_process
from .helpers import make_tree, siblings, snapshot


def test_copy_tree_round_trip(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src, big_size=DIRECT_MIN_SIZE + 12_345)  # O_DIRECT path with a ragged tail
    (src / "many").mkdir()
    for i in range(200):
        (src / "many" / f"f{i}").write_bytes(os.urandom(i))
    sent, kept = copy_in_process(src, dst)
    assert snapshot(dst) == snapshot(src)
    assert (sent, kept) == (206, 0)
    assert os.stat(dst / "big.bin").st_mtime_ns == os.stat(src / "big.bin").st_mtime_ns
    assert siblings(dst) == []


def test_delta_and_mirror(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src)
    copy_in_process(src, dst)
    (src / "a" / "b" / "small.json").write_text('{"step": 4}')
    (src / "new.txt").write_text("new")
    (dst / "extra.txt").write_text("only at the target")
    assert copy_in_process(src, dst) == (2, 5)
    assert (dst / "extra.txt").exists() and (dst / "new.txt").read_text() == "new"
    (src / "exec.sh").unlink()
    assert copy_in_process(src, dst, mirror=True) == (0, 6)
    assert snapshot(dst) == snapshot(src)


def _sink_with(tmp_path: Path, files: list[tuple[str, int]]) -> tuple[SinkWriter, Path]:
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "keep.txt").write_text("old")
    sink = SinkWriter(str(dst), "t")
    send = tuple(Entry(p, EntryKind.FILE, n, 0, 0o644) for p, n in files)
    sink.begin(Plan(dirs=(), send=send, keep=(), links=(), deleted=(), mirror=False))
    return sink, dst


def _frame(pieces: list[Piece], payload: bytes, digests: list[bytes] | None = None) -> np.ndarray:
    buf = np.zeros(header_size(len(pieces)) + len(payload), np.uint8)
    view = memoryview(buf).cast("B")
    encode_header(view, pieces, digests or [bytes(CHECK_SIZE)] * len(pieces))
    view[header_size(len(pieces)) :] = payload
    return buf


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        (lambda: _frame([Piece(1, 0, 3, True)], b"abc"), "expected #0"),
        (lambda: _frame([Piece(0, 5, 3, False)], b"abc"), "does not continue"),
        (lambda: _frame([Piece(0, 0, 20, True)], b"x" * 20), "does not continue"),
        (lambda: _frame([Piece(0, 0, 10, False)], b"x" * 10), "does not continue"),
        (lambda: _frame([Piece(0, 0, 10, True)], b"x" * 10), "checksum mismatch"),
        (lambda: np.frombuffer(b"garbage!", np.uint8), "magic"),
        (lambda: "not a buffer", "not a byte buffer"),
    ],
)
def test_crafted_frames_are_rejected_and_target_untouched(
    tmp_path: Path, frame: Callable[[], object], match: str
) -> None:
    sink, dst = _sink_with(tmp_path, [("f", 10)])
    with pytest.raises(TransferIntegrityError, match=match):
        sink.write(frame())
    with pytest.raises(TransferError):
        sink.commit()
    sink.abort()
    assert sorted(os.listdir(dst)) == ["keep.txt"] and siblings(dst) == []


def test_crafted_plans_are_rejected_before_anything_is_created(tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    bad_plans = [
        Plan((), (Entry("../escape", EntryKind.FILE, 1),), (), (), (), False),
        Plan((), (Entry("/etc/x", EntryKind.FILE, 1),), (), (), (), False),
        Plan((), (), (), (Entry("l", EntryKind.SYMLINK, link="../../etc"),), (), False),
        Plan(
            (),
            (Entry("l/x", EntryKind.FILE, 1),),
            (),
            (Entry("l", EntryKind.SYMLINK, link="."),),
            (),
            False,
        ),
    ]
    for plan in bad_plans:
        with pytest.raises(UnsafePathError):
            SinkWriter(str(dst), "t").begin(plan)
    with pytest.raises(TransferError):
        SinkWriter(str(dst), "t").begin("not a plan")  # type: ignore[arg-type]
    assert not dst.exists() and siblings(dst) == []


def test_a_file_is_never_written_through_a_preexisting_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dst = tmp_path / "dst"
    dst.mkdir()
    os.symlink(outside, dst / "d")  # the target holds a link out; the source has a dir "d"
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "x").write_text("payload")
    copy_in_process(src, dst)
    assert list(outside.iterdir()) == []
    assert (dst / "d").is_dir() and not (dst / "d").is_symlink()


def test_source_file_changing_mid_copy_fails(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "f").write_bytes(b"x" * 100_000)
    source, sink = SourceReader(str(src)), SinkWriter(str(dst), "t")
    plan = make_plan(source.scan(), sink.scan())
    source.start(plan.send)
    sink.begin(plan)
    specs = layout([e.size for e in plan.send], 40_000)
    sink.write(source.read(specs[0]).copy())
    with open(src / "f", "ab") as fh:
        fh.write(b"more")
    source.read(specs[1])  # the growth shows only when the file's last piece is read
    with pytest.raises(TransferIntegrityError, match="changed"):
        source.read(specs[2])
    sink.abort()
    assert not dst.exists() and siblings(dst) == []


def test_a_second_writer_into_the_same_target_is_refused(tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    empty = Plan((), (), (), (), (), False)
    first = SinkWriter(str(dst), "one")
    first.begin(empty)
    with pytest.raises(TransferError, match="in progress"):
        StagedTree(str(dst), "two", lock_timeout=0.2).open()
    first.commit()
    second = SinkWriter(str(dst), "two")
    second.begin(empty)
    second.commit()
    assert dst.is_dir() and siblings(dst) == []


def test_stale_staging_from_a_killed_copy_is_cleaned_by_the_next(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src)
    stale = tmp_path / ".dst.tf-stage-deadbeef"
    stale.mkdir()
    (stale / "junk").write_text("x")
    copy_in_process(src, dst)
    assert siblings(dst) == []
