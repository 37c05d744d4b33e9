"""One measured copy in a fresh interpreter and a fresh ``cluster_utils`` cluster.

Run by ``bench_transfer`` as ``python -m benchmarks._transfer_child SPEC_JSON``; prints
one JSON line with the figures. A fresh process per copy means each copy pays its own
actor start-up and starts from an untouched object store, so memory figures of one run
cannot hide in arenas that an earlier run already grew.
"""

from __future__ import annotations

import json
import mmap
import os
import shutil
import sys
import threading
import time
from typing import Any

import psutil

GiB = 1024**3


class MemorySampler:
    """Peak memory during a copy, two ways.

    ``machine``: growth of the machine's used + shared memory (shared counts the object
    store's pages, which ``used`` leaves out), as the issue asks; other users of the
    machine add noise. ``cluster``: growth of the summed PSS of this process tree (the
    driver, the cluster's raylets and workers), which nobody else can disturb. It also
    sums the CPU seconds the tree spends, a cost that contention on the machine does not
    inflate the way it inflates wall time.
    """

    def __init__(self, interval: float = 0.02, pss_every: int = 10) -> None:
        self._interval = interval
        self._pss_every = pss_every
        self.sampler_cpu = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._cpu_base: dict[int, float] = {}
        self._cpu_last: dict[int, float] = {}
        self.base_machine = self._machine()
        self.base_cluster = self._cluster()
        self.peak_machine = self.base_machine
        self.peak_cluster = self.base_cluster

    @staticmethod
    def _machine() -> int:
        vm = psutil.virtual_memory()
        return int(vm.used + vm.shared)

    def _cluster(self) -> int:
        me = psutil.Process()
        total = 0
        first = not self._cpu_base and not self._cpu_last
        for proc in [me, *me.children(recursive=True)]:
            try:
                total += proc.memory_full_info().pss
                times = proc.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            cpu = times.user + times.system
            if first:
                self._cpu_base[proc.pid] = cpu
            self._cpu_last[proc.pid] = cpu
        return total

    def _run(self) -> None:
        # PSS is costly to read (smaps of every process), so it is read less often; the
        # thread's own CPU is subtracted from the figures.
        tick = 0
        while not self._stop.is_set():
            self.peak_machine = max(self.peak_machine, self._machine())
            if tick % self._pss_every == 0:
                self.peak_cluster = max(self.peak_cluster, self._cluster())
            tick += 1
            self._stop.wait(self._interval)
        self.sampler_cpu = time.thread_time()

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_machine = max(self.peak_machine, self._machine())
        self.peak_cluster = max(self.peak_cluster, self._cluster())

    def figures(self) -> dict[str, int]:
        return {
            "peak_machine_bytes": self.peak_machine - self.base_machine,
            "peak_cluster_bytes": self.peak_cluster - self.base_cluster,
            "cpu_s": sum(v - self._cpu_base.get(k, 0.0) for k, v in self._cpu_last.items())
            - self.sampler_cpu,
        }


def _tree_bytes(root: str) -> tuple[int, int]:
    files = size = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            files += 1
            size += os.lstat(os.path.join(dirpath, name)).st_size
    return files, size


def _write_disk(src: str, dst: str, *, direct: bool = False) -> dict[str, Any]:
    """The disk's own figure for the same files, the limit a copy can approach: every
    file of ``src`` (same paths, same sizes) written from memory in 8 MiB writes, one
    file after another, each fsynced, then every directory fsynced. Nothing is read,
    hashed or sent. Buffered, as ``dd conv=fsync`` writes; with ``direct``, files of
    4 MiB or more bypass the page cache (``O_DIRECT``, as ``dd oflag=direct``), which
    on a machine with much dirty cache is the faster way to the platters."""
    block = mmap.mmap(-1, 8 * 1024 * 1024)  # page-aligned, as O_DIRECT needs
    block.write(os.urandom(len(block)))
    view = memoryview(block)
    made = [dst]
    os.makedirs(dst)
    for dirpath, dirs, names in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        for d in dirs:
            made.append(os.path.normpath(os.path.join(dst, rel, d)))
            os.mkdir(made[-1])
        for name in names:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            size = os.lstat(path).st_size
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
            odirect = direct and size >= 4 * 1024 * 1024
            fd = os.open(os.path.join(dst, rel, name), flags | (os.O_DIRECT if odirect else 0))
            try:
                left = size
                while left:
                    n = min(left, len(view))
                    if odirect:
                        n = -(-n // 4096) * 4096  # whole blocks; the tail is cut below
                    left -= min(os.write(fd, view[:n]), left)
                if odirect:
                    os.ftruncate(fd, size)
                os.fsync(fd)
            finally:
                os.close(fd)
    for path in [*made, os.path.dirname(dst)]:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    view.release()
    block.close()
    return {}


def _write_dd(src: str, dst: str) -> dict[str, Any]:
    """The disk's bandwidth alone: the same number of bytes as ``src`` holds, as one file
    written like ``dd conv=fsync`` (8 MiB buffered writes, one fsync at the end)."""
    _total_files, total = _tree_bytes(src)
    block = memoryview(os.urandom(8 * 1024 * 1024))
    os.makedirs(dst)
    fd = os.open(os.path.join(dst, "all.bin"), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        left = total
        while left:
            left -= os.write(fd, block[: min(left, len(block))])
        os.fsync(fd)
    finally:
        os.close(fd)
    return {"single_file": True}


def _sink_frames(src: str, dst: str) -> tuple[Any, list[Any]]:
    """Every frame ``copy_dir`` would send for ``src``, read into memory up front (this
    is not timed), and the plan for writing them into ``dst``."""
    import mmap as _mmap

    from transfer.api import DEFAULT_CHUNK_SIZE
    from transfer.chunks import layout
    from transfer.delta import make_plan
    from transfer.sink import SinkWriter
    from transfer.source import SourceReader

    reader = SourceReader(src)
    plan = make_plan(reader.scan(), SinkWriter(dst, "bench").scan(), delta=False, mirror=False)
    reader.start(plan.send)
    frames = []
    for spec in layout([e.size for e in plan.send], DEFAULT_CHUNK_SIZE):
        buf = _mmap.mmap(-1, spec.frame_size)
        reader.read_into(spec, memoryview(buf))
        frames.append(buf)
    return plan, frames


def _write_sink(dst: str, plan: Any, frames: list[Any]) -> dict[str, Any]:
    """Our sink alone (no reading, no network): the frames written, checked and made
    durable into ``dst`` as the receiving end of ``copy_dir`` does."""
    from transfer.sink import SinkWriter

    sink = SinkWriter(dst, "bench")
    sink.begin(plan)
    for buf in frames:
        sink.write(memoryview(buf), lambda: None, hold=3)
    sink.commit()
    return {}


def _copy_ray(src_node: str, dst_node: str, src: str, dst: str) -> dict[str, Any]:
    import ray
    from ray.tune.utils.file_transfer import _PackActor, _unpack_from_actor
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as Pin

    # What sync_dir_between_nodes does across nodes, pinned by node id (not IP: every
    # cluster_utils node has the same IP), with its size limit lifted.
    pack = _PackActor.options(num_cpus=0, scheduling_strategy=Pin(src_node, soft=False)).remote(
        source_dir=src, files_stats=None, max_size_bytes=None, exclude=None
    )
    unpack = _unpack_from_actor.options(
        num_cpus=0, scheduling_strategy=Pin(dst_node, soft=False)
    ).remote(pack, dst)
    ray.get(unpack)
    ray.kill(pack)
    return {}


def _copy_ours(
    src_node: str, dst_node: str, src: str, dst: str, spec: dict[str, Any]
) -> dict[str, Any]:
    import transfer

    first: list[float] = []
    started = time.perf_counter()

    def progress(_p: transfer.TransferProgress) -> None:
        if not first:
            first.append(time.perf_counter())

    kwargs: dict[str, Any] = {"delta": False, "progress": progress}
    for key in ("chunk_size", "max_in_flight", "hardlink"):
        if spec.get(key) is not None:
            kwargs[key] = spec[key]
    stats = transfer.copy_dir_sync(src_node, src, dst_node, dst, **kwargs)
    return {
        "startup_s": (first[0] - started) if first else None,
        "chunks": stats.chunks,
    }


def _start_cluster(store: int, *, two_nodes: bool, attempts: int = 3) -> tuple[Any, Any]:
    """A head node and, if asked, one worker node. On a loaded machine a raylet can miss
    its start-up deadline; that is retried, as it says nothing about the copy."""
    from ray.cluster_utils import Cluster

    for attempt in range(attempts):
        cluster = None
        try:
            cluster = Cluster(
                initialize_head=True,
                head_node_args={
                    "num_cpus": 1,
                    "object_store_memory": store,
                    "include_dashboard": False,
                },
            )
            worker = None
            if two_nodes:
                # Added before the driver connects, so that both nodes prestart their
                # pool of workers, as long-lived nodes of a real cluster have.
                worker = cluster.add_node(num_cpus=1, object_store_memory=store)
                cluster.wait_for_nodes()
            return cluster, worker
        except Exception:
            if cluster is not None:
                cluster.shutdown()
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def run(spec: dict[str, Any]) -> dict[str, Any]:
    system, src, dst = spec["system"], spec["src"], spec["dst"]
    shutil.rmtree(dst, ignore_errors=True)
    cluster = None
    src_node = dst_node = ""
    if system not in ("copytree", "disk", "direct", "dd", "sink"):
        import ray

        store = int(spec.get("object_store", GiB))
        cluster, worker = _start_cluster(store, two_nodes=system in ("ray", "ours"))
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        src_node = dst_node = ray.get_runtime_context().get_node_id()
        if worker is not None:
            dst_node = worker.node_id
        time.sleep(3.0)  # let the prestarted worker pools settle before the baseline
    try:
        if spec.get("warmup"):
            # One small copy by the same system first: worker pools, imports and the
            # object stores are then warm, and the measured copy shows steady costs.
            warm_dst = dst + "-warmup"
            if system == "ray":
                _copy_ray(src_node, dst_node, spec["warmup"], warm_dst)
            elif system == "copytree":
                shutil.copytree(spec["warmup"], warm_dst, symlinks=True)
            elif system in ("disk", "direct"):
                _write_disk(spec["warmup"], warm_dst, direct=system == "direct")
            elif system == "sink":
                _write_sink(warm_dst, *_sink_frames(spec["warmup"], warm_dst))
            elif system == "dd":
                _write_dd(spec["warmup"], warm_dst)
            else:
                _copy_ours(src_node, dst_node, spec["warmup"], warm_dst, spec)
            shutil.rmtree(warm_dst, ignore_errors=True)
            time.sleep(1.0)
        frames = _sink_frames(src, dst) if system == "sink" else None
        # Start clean: dirty pages an earlier run (or the source tree's writing) left
        # would otherwise be flushed on this run's fsyncs and bill it for them.
        os.sync()
        with MemorySampler() as mem:
            started = time.perf_counter()
            if system == "ray":
                extra = _copy_ray(src_node, dst_node, src, dst)
            elif system == "copytree":
                shutil.copytree(src, dst, symlinks=True)
                extra = {}
            elif system in ("disk", "direct"):
                extra = _write_disk(src, dst, direct=system == "direct")
            elif frames is not None:
                extra = _write_sink(dst, *frames)
            elif system == "dd":
                extra = _write_dd(src, dst)
            else:
                extra = _copy_ours(src_node, dst_node, src, dst, spec)
            seconds = time.perf_counter() - started
        files, size = _tree_bytes(dst)
        expect_files, expect_size = _tree_bytes(src)
        ok = (files, size) == (expect_files, expect_size) or (
            bool(extra.get("single_file")) and size == expect_size
        )
        return {"system": system, "seconds": seconds, "ok": ok, **mem.figures(), **extra}
    finally:
        if cluster is not None:
            import ray

            ray.shutdown()
            cluster.shutdown()
        shutil.rmtree(dst, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    result = run(json.loads(sys.argv[1]))
    print("RESULT " + json.dumps(result), flush=True)
