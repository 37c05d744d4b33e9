"""``copy_dir``: the driver-side entry point of one copy.

It runs in the caller's asyncio loop and only ever awaits ObjectRefs, so an
orchestrator can run many copies beside its other events. The bytes never pass through
the driver: it starts one streaming task on the target node (``tasks.receive``), which
plans the delta and receives checksummed frames from a reader task on the source node,
a bounded window ahead (over a direct TCP stream, or through the object store when the
nodes cannot connect directly: :mod:`transfer.tcp`); the driver only receives small
progress events. Same-node copies run as one task on that node (:mod:`transfer.same_node`).

Failure handling lives here too: Ray's errors become :class:`TransferError` kinds at one
place (``_translate``), and on any failure or cancellation the copying task is killed
(its reader dies with it, as Ray kills the tasks of a dead owner) and the target node's
staging directory is removed, so the target stays as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NoReturn

import ray
import ray.exceptions as rex

from .errors import NodeLostError, TransferError
from .from_store import ContentStore
from .ray_errors import is_lost
from .same_node import LocalResult, copy_local
from .staging import clean_stale
from .stats import TransferProgress, TransferStats
from .tasks import Finished, Landed, Settings, Started, pinned, receive_task

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_IN_FLIGHT",
    "ProgressCallback",
    "copy_dir",
    "copy_dir_sync",
]

# 8 MiB x 4: big enough that per-chunk overheads vanish (16 and 32 MiB were no faster
# here), small enough that reading, moving and writing overlap; each end holds about
# chunk_size * max_in_flight of frame buffers.
DEFAULT_CHUNK_SIZE = 8 * 1024 * 1024
DEFAULT_MAX_IN_FLIGHT = 4
_CLEANUP_TIMEOUT = 15.0

ProgressCallback = Callable[[TransferProgress], "Awaitable[None] | None"]

_local_task: Any = ray.remote(copy_local)
_clean_task: Any = ray.remote(clean_stale)


async def copy_dir(
    source_node_id: str,
    source_path: str,
    target_node_id: str,
    target_path: str,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    delta: bool = True,
    mirror: bool = False,
    max_size: int | None = None,
    exclude: Sequence[str] = (),
    progress: ProgressCallback | None = None,
    always_checksum: bool = False,
    hardlink: bool = True,
    content_store: ContentStore | None = None,
) -> TransferStats:
    """Copy directory ``source_path`` on one node to ``target_path`` on another.

    Node ids are hex strings as ``ray.get_runtime_context().get_node_id()`` returns
    them; paths are absolute paths on those nodes. Memory on each side stays around
    ``chunk_size * max_in_flight``. With ``delta``, files the target already holds
    (same size and mtime, or same checksum) are not sent; ``always_checksum`` compares
    checksums even when size and mtime agree. With ``mirror``, target entries absent from
    the source disappear (excluded ones are kept). ``exclude`` holds glob patterns (a
    pattern without ``/`` matches names at any depth). ``max_size`` bounds the bytes to
    send and is checked before any byte moves. ``progress`` (sync or async) is called
    as chunks land (after the first, then at most every 50 ms, and after the last); if
    it raises, the copy is abandoned. On the same node,
    files are hard-linked when ``hardlink`` (see :mod:`transfer.same_node`) or copied by
    the kernel. Across nodes, ``content_store`` names a directory of SHA-256-named files
    on the target (a local storage's blobs) and the SHA-256 of source files: those it
    holds are copied there from it, not sent (:mod:`transfer.from_store`; counted as
    skipped).

    The target changes only at the very end, all at once, once every byte of the new
    tree is on the disk (fsynced: a crash leaves the old tree or the new one); on any
    error (always a :class:`TransferError`) or cancellation it is as it was before.
    """
    if chunk_size < 4096:
        raise ValueError(f"chunk_size must be at least 4096 bytes, got {chunk_size}")
    if max_in_flight < 1:
        raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
    if not (source_path.startswith("/") and target_path.startswith("/")):
        raise ValueError("source_path and target_path must be absolute paths on their nodes")
    if isinstance(exclude, str):
        raise TypeError("exclude takes a sequence of glob patterns, not a single string")
    if not ray.is_initialized():
        raise TransferError("Ray is not initialised: call ray.init(address=...) first")
    started = time.perf_counter()
    dead = await _dead_nodes((source_node_id, target_node_id))
    if dead:
        raise NodeLostError(f"node(s) {', '.join(dead)} are not alive in this Ray cluster")
    token = uuid.uuid4().hex[:12]
    options: dict[str, Any] = {
        "delta": delta,
        "mirror": mirror,
        "always_checksum": always_checksum,
        "max_size": max_size,
        "exclude": tuple(exclude),
    }
    if source_node_id == target_node_id:
        res = await _copy_same_node(
            source_node_id, source_path, target_path, token, options, hardlink
        )
        return TransferStats(
            bytes_sent=res.bytes_sent,
            files_sent=res.files_sent,
            files_skipped=res.files_skipped,
            files_deleted=res.files_deleted,
            chunks=0,
            seconds=time.perf_counter() - started,
            same_node=True,
        )
    settings = Settings(
        chunk_size=chunk_size, max_in_flight=max_in_flight, store=content_store, **options
    )
    return await _copy_across(
        (source_node_id, source_path),
        (target_node_id, target_path),
        token,
        settings,
        progress=progress,
        started=started,
    )


async def _copy_same_node(
    node_id: str,
    source_path: str,
    target_path: str,
    token: str,
    options: dict[str, Any],
    hardlink: bool,
) -> LocalResult:
    if node_id == ray.get_runtime_context().get_node_id():
        return await _copy_in_thread(source_path, target_path, token, options, hardlink)
    ref = _local_task.options(**pinned(node_id)).remote(
        source_path, target_path, token, hardlink=hardlink, **options
    )
    try:
        result: LocalResult = await ref
    except BaseException as err:
        ray.cancel(ref, force=True)
        await _cleanup(node_id, target_path)
        await _reraise(err, node_id, node_id)
    return result


async def _copy_in_thread(
    source_path: str, target_path: str, token: str, options: dict[str, Any], hardlink: bool
) -> LocalResult:
    """The driver's own node: a thread of this process, no task to schedule. A thread
    cannot be killed, so cancelling asks it to stop and waits for its clean abort."""
    cancelled = threading.Event()
    job = asyncio.ensure_future(
        asyncio.to_thread(
            copy_local,
            source_path,
            target_path,
            token,
            hardlink=hardlink,
            cancelled=cancelled,
            **options,
        )
    )
    try:
        return await asyncio.shield(job)
    except asyncio.CancelledError:
        cancelled.set()
        with contextlib.suppress(BaseException):
            await job
        raise
    except Exception as err:
        node = str(ray.get_runtime_context().get_node_id())
        await _reraise(err, node, node)
        raise  # unreachable: _reraise always raises


async def _reraise(err: BaseException, src_node: str, dst_node: str) -> NoReturn:
    """Raise what the caller should see for ``err`` (chained to it when mapped)."""
    mapped = await _translate(err, src_node, dst_node)
    if mapped is err:
        raise err
    raise mapped from err


async def _copy_across(
    source: tuple[str, str],
    target: tuple[str, str],
    token: str,
    settings: Settings,
    *,
    progress: ProgressCallback | None,
    started: float,
) -> TransferStats:
    (src_node, src_path), (dst_node, dst_path) = source, target
    # Backpressure keeps the copying task at most a few progress events (each up to
    # 50 ms of frames) ahead of this loop, so it cannot race to its commit while the
    # caller (who may yet cancel) lags.
    gen = receive_task.options(
        **pinned(dst_node),
        num_returns="streaming",
        _generator_backpressure_num_objects=settings.max_in_flight,
    ).remote(src_node, src_path, dst_path, token, settings)
    done: _Progress | None = None
    finished: Finished | None = None
    try:
        async for ref in gen:
            event = await ref
            if isinstance(event, Started):
                done = _Progress(event.bytes_total, event.files_total, event.chunks_total, progress)
            elif isinstance(event, Landed) and done is not None:
                await done.landed(event.nbytes, event.files, event.chunks)
            elif isinstance(event, Finished):
                finished = event
        if finished is None:
            raise TransferError(f"the copy into {dst_path!r} on node {dst_node} ended early")
    except BaseException as err:
        ray.cancel(gen, force=True)
        await _cleanup(dst_node, dst_path)
        await _reraise(err, src_node, dst_node)
    result = finished.result
    return TransferStats(
        bytes_sent=result.bytes_written,
        files_sent=result.files_written,
        files_skipped=result.files_kept,
        files_deleted=finished.files_deleted,
        chunks=finished.chunks,
        seconds=time.perf_counter() - started,
        same_node=False,
    )


class _Progress:
    def __init__(
        self, nbytes: int, nfiles: int, nchunks: int, callback: ProgressCallback | None
    ) -> None:
        self._totals = (nbytes, nfiles, nchunks)
        self._bytes = self._files = self._chunks = 0
        self._callback = callback

    async def landed(self, nbytes: int, files: int, chunks: int) -> None:
        self._bytes += nbytes
        self._files += files
        self._chunks += chunks
        if self._callback is None:
            return
        nbytes, nfiles, nchunks = self._totals
        ret = self._callback(
            TransferProgress(self._bytes, nbytes, self._files, nfiles, self._chunks, nchunks)
        )
        if inspect.isawaitable(ret):
            await ret


async def _dead_nodes(node_ids: Sequence[str]) -> list[str]:
    """Which of ``node_ids`` the GCS does not list as alive (read off the loop)."""
    nodes = await asyncio.to_thread(ray.nodes)
    alive = {n["NodeID"] for n in nodes if n.get("Alive")}
    return [n for n in dict.fromkeys(node_ids) if n not in alive]


async def _cleanup(node_id: str, target_path: str) -> None:
    """Best effort: remove the staging a killed writer left. A later copy into the same
    target removes it anyway, so failures here are ignored."""
    try:
        if await _dead_nodes((node_id,)):
            return
        ref = _clean_task.options(**pinned(node_id)).remote(target_path)
        # Not asyncio.wait_for, which before Python 3.12 can lose a cancellation.
        cleaning = asyncio.ensure_future(ref)
        try:
            await asyncio.wait({cleaning}, timeout=_CLEANUP_TIMEOUT)
        finally:
            cleaning.cancel()
    except Exception:  # cleanup must never mask the real error
        pass


async def _translate(err: BaseException, src_node: str, dst_node: str) -> BaseException:
    """Map one failure of a copy to what the caller should see (see module docstring)."""
    remote = isinstance(err, rex.RayError)
    while isinstance(err, rex.RayTaskError) and err.cause is not None and err.cause is not err:
        err = err.cause  # a failure may come wrapped once per task hop
    if isinstance(err, TransferError):
        return err
    if is_lost(err):
        dead = await _dead_nodes((src_node, dst_node))
        if dead:
            which = " and ".join(
                f"{'source' if n == src_node else 'target'} node {n}" for n in dead
            )
            what = f"{which} died mid-copy"
        else:
            what = f"a worker copying from node {src_node} to node {dst_node} died mid-copy"
        return NodeLostError(f"{what}; the target is unchanged, retry on a live node")
    if isinstance(err, OSError) or (remote and isinstance(err, Exception)):
        return TransferError(f"copy from node {src_node} to node {dst_node} failed: {err!r}")
    return err


def copy_dir_sync(
    source_node_id: str,
    source_path: str,
    target_node_id: str,
    target_path: str,
    **options: Any,
) -> TransferStats:
    """Blocking :func:`copy_dir` for scripts; same keyword options.

    Refuses to run inside an event loop, where it would block every other task: await
    :func:`copy_dir` there instead.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(
            copy_dir(source_node_id, source_path, target_node_id, target_path, **options)
        )
    raise RuntimeError("copy_dir_sync() called from a running event loop; await copy_dir()")
