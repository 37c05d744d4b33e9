"""How ``benchmarks.bench_checkpoint_bytes`` counts bytes written to storage: the rules its
tables stand on (issue 36, item 2), checked on real files without Ray."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks._ckpt_bytes_common import (
    OUR_MANIFEST,
    is_checkpoint_path,
    read_safetensors,
    save_latencies,
    scan,
    write_safetensors,
)
from benchmarks.bench_checkpoint_bytes import stored_since


def _checkpoint(root: Path, name: str) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / OUR_MANIFEST).write_text("{}")
    return d


def test_a_blob_linked_into_many_checkpoints_counts_once(tmp_path: Path) -> None:
    blob = tmp_path / ".blobs" / "ab" / "abcd"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"x" * 1000)
    for i in range(3):
        os.link(blob, _checkpoint(tmp_path, f"t/checkpoint_00000{i}") / "frozen.safetensors")
    seen: dict = {}
    scan(str(tmp_path), seen, committed_only=False)
    big = [size for size, _ in seen.values() if size == 1000]
    assert big == [1000]


def test_a_file_replaced_after_a_scan_counts_again(tmp_path: Path) -> None:
    d = _checkpoint(tmp_path, "t/checkpoint_000001")
    (d / "model.safetensors").write_bytes(b"a" * 100)
    seen: dict = {}
    scan(str(tmp_path), seen, committed_only=True)
    (d / "model.safetensors").unlink()  # deleted; a new file may reuse its inode
    (d / "model.safetensors").write_bytes(b"b" * 100)
    os.utime(d / "model.safetensors", ns=(1, 1))  # another version, whatever the inode
    scan(str(tmp_path), seen, committed_only=True)
    assert sum(size for size, path in seen.values() if path.endswith("model.safetensors")) == 200


def test_only_committed_checkpoints_are_scanned_before_the_end(tmp_path: Path) -> None:
    staging = tmp_path / "t" / ".stage-checkpoint_000001"
    staging.mkdir(parents=True)
    (staging / "model.safetensors").write_bytes(b"partial")
    seen: dict = {}
    scan(str(tmp_path), seen, committed_only=True)
    assert seen == {}


def test_the_one_file_layout_puts_the_tensors_off_chunk_boundaries(tmp_path: Path) -> None:
    chunk = 4 << 20  # cas-object's fixed chunk
    frozen, changing = os.urandom(chunk), os.urandom(4096)
    path = tmp_path / "model.safetensors"
    write_safetensors(str(path), [("backbone", frozen), ("head", changing)])
    assert read_safetensors(str(path)) == {"backbone": frozen, "head": changing}
    header = path.stat().st_size - len(frozen) - len(changing)
    # As in a real safetensors file: the changing tensor does not start a chunk, so the
    # chunk before it holds frozen bytes and changing ones, and changes too.
    assert header % 8 == 0
    assert (header + len(frozen)) % chunk != 0


def test_records_are_not_checkpoint_bytes() -> None:
    assert is_checkpoint_path("bytes/.blobs/sha256/ab/abcd")
    assert is_checkpoint_path("bytes/sweep_00000/checkpoint_000003.1/model.safetensors")
    assert is_checkpoint_path("bytes/sweep_00000/.stage-x/frozen.safetensors")
    assert not is_checkpoint_path("bytes/sweep_00000/result.json")
    assert not is_checkpoint_path("bytes/experiment_state.json")


def test_stored_bytes_are_those_of_the_run_before_its_probe(tmp_path: Path) -> None:
    log = tmp_path / "stored.log"
    log.write_text(
        "10.0\ttrialflow-bench/run-a/bytes/.blobs/sha256/ab/x\t100\n"
        "11.0\ttrialflow-bench/run-b/bytes/.blobs/sha256/ab/x\t7\n"
        "12.0\ttrialflow-bench/run-a/bytes/experiment_state.json\t5\n"
        "20.0\ttrialflow-bench/run-a/bytes/probe/checkpoint_000001/m\t1000\n"
    )
    offset, totals = stored_since(log, 0, "run-a", before=15.0)
    assert offset == log.stat().st_size
    assert totals == {
        "objects_written": 2,
        "bytes_written": 105,
        "checkpoint_bytes_written": 100,
    }


def test_a_save_is_timed_from_its_own_start() -> None:
    stamps = [
        {"ev": "save_start", "trial": "a", "it": 1, "t": 1.0},
        {"ev": "save_start", "trial": "a", "it": 2, "t": 2.0},
        {"ev": "save_start", "trial": "b", "it": 1, "t": 2.5},
    ]
    # a's first checkpoint is reported after its second save started: matched by
    # iteration, not by the newest save; Tune's hooks name no iteration.
    assert save_latencies(stamps, [("a", 1, 3.0), ("b", None, 3.0)]) == [2.0, 0.5]
