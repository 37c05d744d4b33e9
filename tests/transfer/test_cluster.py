"""copy_dir on real multi-node ``cluster_utils`` clusters: the session's head node plus
worker nodes from ``add_node``. Every node shares this machine's disk, so the tests can
look at both ends directly."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import transfer
from transfer.chunks import Piece, encode_header, header_size
from transfer.delta import Plan
from transfer.errors import TransferIntegrityError, UnsafePathError
from transfer.listing import Entry, EntryKind
from transfer.sink import SinkWriter

from .helpers import make_tree, siblings, snapshot

pytestmark = pytest.mark.cluster

KiB = 1024
NODE = {"num_cpus": 1, "object_store_memory": 96 * 1024**2}


#: tests/transfer/gate: a node started with it first on PYTHONPATH pauses every copy
#: after PAUSE_AFTER frames read (its source side) or written (its target side).
GATE_PATH = Path(__file__).resolve().parent / "gate"
PAUSE_AFTER = 3
#: Seconds a copy may take to reach the pause on a loaded machine (a new node's first
#: workers start, the plan, three frames).
PAUSE_TIMEOUT_S = 120.0


def add_gated_node(add_node: Any, gate: Path) -> Any:
    """A new node whose workers pause copies at ``gate`` (see ``tests/transfer/gate``).

    A node's processes take the environment of the process that starts it; no other
    node (the head included) sees the gate."""
    gate.mkdir()
    paths = [str(GATE_PATH), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYTHONPATH", os.pathsep.join(paths))
        env.setenv("TRANSFER_TEST_GATE", str(gate))
        env.setenv("TRANSFER_TEST_PAUSE_AFTER", str(PAUSE_AFTER))
        return add_node(**NODE)


async def wait_paused(gate: Path, copy: asyncio.Future[Any]) -> None:
    """Until the gated node's worker holds the copy at its pause."""
    deadline = asyncio.get_running_loop().time() + PAUSE_TIMEOUT_S
    while not (gate / "paused").exists():
        if copy.done():
            copy.result()  # its error, if any
            pytest.fail("the copy finished though the gated node holds it at a pause")
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"the copy did not reach the pause within {PAUSE_TIMEOUT_S} s")
        await asyncio.sleep(0.05)


def small_settings(max_in_flight: int, *, direct: bool = True) -> Any:
    """Settings for a plain full copy in 64 KiB chunks (the tests that call the tasks)."""
    from transfer.tasks import Settings

    return Settings(
        chunk_size=64 * KiB,
        max_in_flight=max_in_flight,
        delta=True,
        mirror=False,
        always_checksum=False,
        max_size=None,
        exclude=(),
        direct=direct,
    )


def head_id() -> str:
    return str(ray.get_runtime_context().get_node_id())


def make_many(root: Path, n: int) -> None:
    many = root / "many" / "deeper"
    many.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        (many / f"s{i:04d}.bin").write_bytes(rng.bytes(int(rng.integers(0, 3000))))


async def test_two_nodes_tree_delta_and_mirror(add_node: Any, tmp_path: Path) -> None:
    node = add_node(**NODE)
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src, big_size=700 * KiB)  # 11 chunks of 64 KiB
    make_many(src, 400)
    seen: list[transfer.TransferProgress] = []

    stats = await transfer.copy_dir(
        head_id(), str(src), node.node_id, str(dst), chunk_size=64 * KiB, progress=seen.append
    )
    assert snapshot(dst) == snapshot(src)
    assert (stats.files_sent, stats.files_skipped, stats.same_node) == (406, 0, False)
    assert stats.bytes_sent == sum(
        p.stat().st_size for p in src.rglob("*") if p.is_file() and not p.is_symlink()
    )
    # Progress comes after the first chunk, then at most every 50 ms, then after the last.
    assert stats.chunks >= 11 and 1 <= len(seen) <= stats.chunks
    assert seen[-1].bytes_done == seen[-1].bytes_total == stats.bytes_sent
    assert seen[0].chunks_done == 1 and seen[-1].chunks_done == stats.chunks
    done = [p.chunks_done for p in seen]
    assert done == sorted(set(done))

    (src / "a" / "b" / "small.json").write_text('{"step": 4}')
    (src / "new.txt").write_text("new")
    os.utime(src / "big.bin")  # new mtime, same bytes: the checksum says skip
    (dst / "extra.txt").write_text("only at the target")
    stats = await transfer.copy_dir(head_id(), str(src), node.node_id, str(dst))
    assert (stats.files_sent, stats.files_skipped) == (2, 405)
    assert (dst / "extra.txt").exists()
    assert os.stat(dst / "big.bin").st_mtime_ns == os.stat(src / "big.bin").st_mtime_ns

    (src / "exec.sh").unlink()
    stats = await transfer.copy_dir(head_id(), str(src), node.node_id, str(dst), mirror=True)
    assert (stats.files_sent, stats.files_deleted) == (0, 2)
    assert snapshot(dst) == snapshot(src) and siblings(dst) == []


async def test_three_nodes_exclude_limit_and_same_node(add_node: Any, tmp_path: Path) -> None:
    one, two = add_node(**NODE), add_node(**NODE)
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src)
    (src / "tmp").mkdir()
    (src / "tmp" / "scratch.log").write_text("x")

    with pytest.raises(transfer.SizeLimitExceeded):
        await transfer.copy_dir(one.node_id, str(src), two.node_id, str(dst), max_size=1000)
    assert not dst.exists()

    stats = await transfer.copy_dir(
        one.node_id, str(src), two.node_id, str(dst), exclude=["tmp", "*.log"]
    )
    assert not (dst / "tmp").exists() and stats.files_sent == 6

    local = tmp_path / "local"
    stats = await transfer.copy_dir(two.node_id, str(dst), two.node_id, str(local))
    assert stats.same_node and snapshot(local) == snapshot(dst)
    assert os.stat(local / "big.bin").st_ino == os.stat(dst / "big.bin").st_ino  # hard link


def pinned_actor(node_id: str) -> dict[str, Any]:
    return {
        "num_cpus": 0,
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
    }


def _frame(pieces: list[Piece], payload: bytes) -> np.ndarray:
    buf = np.zeros(header_size(len(pieces)) + len(payload), np.uint8)
    view = memoryview(buf).cast("B")
    encode_header(view, pieces, [bytes(32)] * len(pieces))
    view[header_size(len(pieces)) :] = payload
    return buf


async def test_crafted_plan_and_chunk_at_a_real_sink(ray_cluster: Any, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "keep.txt").write_text("old")
    sink = ray.remote(SinkWriter).options(**pinned_actor(head_id())).remote(str(dst), "crafted")
    try:
        evil = Plan((), (Entry("../../evil", EntryKind.FILE, 3),), (), (), (), False)
        with pytest.raises(UnsafePathError):
            await sink.begin.remote(evil)
        plan = Plan((), (Entry("f", EntryKind.FILE, 3),), (), (), (), False)
        await sink.begin.remote(plan)
        # A piece that tries to grow the file past its announced size.
        with pytest.raises(TransferIntegrityError):
            await sink.write.remote(ray.put(_frame([Piece(0, 0, 9, True)], b"123456789")))
        await sink.abort.remote()
    finally:
        ray.kill(sink)
    assert sorted(os.listdir(dst)) == ["keep.txt"] and siblings(dst) == []
    assert not (tmp_path.parent / "evil").exists()


async def test_cancellation_midway_leaves_the_target_as_it_was(
    add_node: Any, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    node = add_gated_node(add_node, gate)
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "weights.bin").write_bytes(os.urandom(16 * 32 * KiB))
    dst.mkdir()
    (dst / "weights.bin").write_bytes(b"previous checkpoint")
    before = snapshot(dst)
    task = asyncio.ensure_future(
        transfer.copy_dir(
            head_id(), str(src), node.node_id, str(dst), chunk_size=32 * KiB, max_in_flight=2
        )
    )
    await wait_paused(gate, task)  # the writer holds PAUSE_AFTER frames of 16, no more
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert snapshot(dst) == before
    assert siblings(dst) == []  # the killed writer's staging was removed


@pytest.mark.parametrize("dying", ["source", "target"])
async def test_node_death_midway_raises_and_leaves_the_target(
    ray_cluster: Any, add_node: Any, tmp_path: Path, dying: str
) -> None:
    """The dying node's reader (or writer) pauses after PAUSE_AFTER frames of 16, so
    the node is removed mid-copy whatever the machine's speed."""
    gate = tmp_path / "gate"
    node = add_gated_node(add_node, gate)
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "weights.bin").write_bytes(os.urandom(16 * 32 * KiB))
    dst.mkdir()
    (dst / "weights.bin").write_bytes(b"previous checkpoint")
    before = snapshot(dst)
    ends = (node.node_id, head_id()) if dying == "source" else (head_id(), node.node_id)
    task = asyncio.ensure_future(
        transfer.copy_dir(
            ends[0], str(src), ends[1], str(dst), chunk_size=32 * KiB, max_in_flight=2
        )
    )
    await wait_paused(gate, task)
    await asyncio.to_thread(ray_cluster.remove_node, node, False)
    with pytest.raises(transfer.NodeLostError, match="died"):
        await task
    assert snapshot(dst) == before
    # Whatever a dead writer left beside the target, the next copy clears it.
    stats = await transfer.copy_dir(head_id(), str(src), head_id(), str(dst))
    assert stats.files_sent == 1 and siblings(dst) == []


async def test_sync_wrapper_refuses_a_running_loop(ray_cluster: Any, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="await copy_dir"):
        transfer.copy_dir_sync(head_id(), str(tmp_path), head_id(), str(tmp_path / "x"))


async def test_unknown_node_is_a_clear_error(ray_cluster: Any, tmp_path: Path) -> None:
    with pytest.raises(transfer.NodeLostError, match="not alive"):
        await transfer.copy_dir("ab" * 28, str(tmp_path), head_id(), str(tmp_path / "x"))


def test_copy_dir_sync_from_a_script(ray_cluster: Any, tmp_path: Path) -> None:
    make_tree(tmp_path / "src")
    pinned = NodeAffinitySchedulingStrategy(head_id(), soft=False)
    assert pinned.node_id == head_id()
    stats = transfer.copy_dir_sync(
        head_id(), str(tmp_path / "src"), head_id(), str(tmp_path / "dst"), hardlink=False
    )
    assert stats.files_sent == 6 and snapshot(tmp_path / "dst") == snapshot(tmp_path / "src")


async def test_cancelling_a_same_node_copy_in_the_driver(
    ray_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy's thread is held after its first file until the cancel has asked it to
    stop: the cancel lands mid-copy however fast or slow the machine (a poll for the
    staging tree could miss a whole copy while this process waited for a core). The
    product has no hook for this: the test wraps the real functions in this process."""
    from transfer import api, local

    src, dst = tmp_path / "src", tmp_path / "dst"
    make_many(src, 20)
    dst.mkdir()
    (dst / "old").write_text("old")
    asked: list[threading.Event] = []  # the copy's own "stop" flag
    paused = threading.Event()
    copy_local, copy_file = local.copy_local, local._copy_file

    def copy_local_noting_its_flag(*args: Any, cancelled: threading.Event, **kwargs: Any) -> Any:
        asked.append(cancelled)
        return copy_local(*args, cancelled=cancelled, **kwargs)

    def copy_file_then_hold(*args: Any) -> None:
        copy_file(*args)
        if not paused.is_set():
            paused.set()
            asked[0].wait(300)

    monkeypatch.setattr(api, "copy_local", copy_local_noting_its_flag)
    monkeypatch.setattr(local, "_copy_file", copy_file_then_hold)
    task = asyncio.ensure_future(
        transfer.copy_dir(head_id(), str(src), head_id(), str(dst), hardlink=False)
    )
    assert await asyncio.to_thread(paused.wait, 300), "the copy never started"
    assert siblings(dst) and not task.done()  # under way, staged beside the target
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(os.listdir(dst)) == ["old"] and siblings(dst) == []


async def test_object_store_path_when_direct_streams_are_off(add_node: Any, tmp_path: Path) -> None:
    """The fallback byte path (frames through the object store) copies the same tree."""
    import time

    from transfer.api import _copy_across

    node = add_node(**NODE)
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src, big_size=700 * KiB)
    settings = small_settings(3, direct=False)
    stats = await _copy_across(
        (head_id(), str(src)),
        (node.node_id, str(dst)),
        "fallback",
        settings,
        progress=None,
        started=time.perf_counter(),
    )
    assert snapshot(dst) == snapshot(src) and siblings(dst) == []
    assert stats.chunks >= 11 and stats.files_sent == 6


def test_a_reader_that_cannot_connect_falls_back_to_the_object_store(
    add_node: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``receive`` run in this process: its listener advertises a port nobody listens
    on, the remote reader gets DirectUnavailable, and the frames take the object store."""
    import socket

    from transfer import tasks

    class Unreachable(tasks.Listener):
        def __init__(self) -> None:
            super().__init__()
            closed = socket.socket()
            closed.bind((self.address[0], 0))
            self.address = (self.address[0], closed.getsockname()[1])
            closed.close()

    monkeypatch.setattr(tasks, "Listener", Unreachable)
    node = add_node(**NODE)
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src, big_size=300 * KiB)
    settings = small_settings(2)
    events = list(tasks.receive(node.node_id, str(src), str(dst), "unreachable", settings))
    assert isinstance(events[-1], tasks.Finished) and events[-1].result.files_written == 6
    landed = [e for e in events if isinstance(e, tasks.Landed)]
    assert sum(e.chunks for e in landed) == events[-1].chunks >= 5
    assert snapshot(dst) == snapshot(src) and siblings(dst) == []
