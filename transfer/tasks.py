"""The Ray tasks of a cross-node copy; the receiving task conducts it from the target.

Why tasks, not actors: an actor gets a freshly started worker process (measured here:
seconds of start-up under load and ~100 MiB each), while a task runs in one of the
node's already started pooled workers. So a copy is:

* ``receive`` - a streaming-generator task pinned to the target node. It lists both
  sides, plans the delta, checks ``max_size``, then consumes the source's frames and
  writes them with :class:`~transfer.sink.SinkWriter`, yielding small progress events
  to the driver, which only ever awaits those.
* ``read_frames`` - a streaming-generator task pinned to the source node, started by
  ``receive``; Ray's generator backpressure stops it a bounded number of frames ahead.
* ``scan_source`` / ``digest_source`` - short tasks on the source node for the plan.

A prefetch thread in ``receive`` takes each frame's ref as soon as it exists and pulls
it to the target node (``ray.wait(fetch_local=True)``) while the previous frame is
being written: reading, moving and writing overlap, with at most ``max_in_flight``
frames pulled ahead. The frame owner is the ``receive`` worker; if it dies (target node
lost, copy cancelled), Ray kills the reading task with it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from .chunks import ChunkSpec, layout
from .errors import SizeLimitExceeded, TransferError
from .manifest import Entry
from .plan import make_plan, needs_checksum
from .sink import CommitResult, SinkWriter
from .source import SourceReader

__all__ = ["Finished", "Landed", "Settings", "Started", "pinned", "receive_task"]

_END = object()


@dataclass(frozen=True, slots=True)
class Settings:
    chunk_size: int
    max_in_flight: int
    delta: bool
    mirror: bool
    always_checksum: bool
    max_size: int | None
    exclude: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Started:
    bytes_total: int
    files_total: int
    chunks_total: int


@dataclass(frozen=True, slots=True)
class Landed:
    nbytes: int
    files: int


@dataclass(frozen=True, slots=True)
class Finished:
    result: CommitResult
    files_deleted: int
    chunks: int


def pinned(node_id: str) -> dict[str, Any]:
    return {
        "num_cpus": 0,
        "max_retries": 0,
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
    }


def scan_source(root: str, exclude: Sequence[str]) -> list[Entry]:
    return SourceReader(root).scan(exclude)


def digest_source(root: str, paths: Sequence[str]) -> list[bytes]:
    return SourceReader(root).digests(paths)


def read_frames(
    root: str, files: Sequence[Entry], specs: Sequence[ChunkSpec]
) -> Iterator[npt.NDArray[np.uint8]]:
    # Ray stores each yielded frame before resuming us, so one buffer serves them all.
    reader = SourceReader(root)
    reader.start(files)
    for spec in specs:
        yield reader.read(spec)


_scan_task: Any = ray.remote(scan_source)
_digest_task: Any = ray.remote(digest_source)
_read_task: Any = ray.remote(read_frames)


def receive(
    source_node_id: str, source_path: str, target_path: str, token: str, settings: Settings
) -> Iterator[Started | Landed | Finished]:
    on_source = pinned(source_node_id)
    writer = SinkWriter(target_path, token)
    listing = _scan_task.options(**on_source).remote(source_path, settings.exclude)
    src_list: list[Entry] = _get(listing)
    dst_list = writer.scan(settings.exclude)
    ambiguous = needs_checksum(src_list, dst_list, always_checksum=settings.always_checksum)
    src_dig: list[bytes] = []
    dst_dig: list[bytes] = []
    if ambiguous and settings.delta:
        pending = _digest_task.options(**on_source).remote(source_path, ambiguous)
        dst_dig = writer.digests(ambiguous)
        src_dig = _get(pending)
    plan = make_plan(
        src_list,
        dst_list,
        delta=settings.delta,
        mirror=settings.mirror,
        always_checksum=settings.always_checksum,
        source_digests=dict(zip(ambiguous, src_dig, strict=False)),
        target_digests=dict(zip(ambiguous, dst_dig, strict=False)),
        exclude=settings.exclude,
    )
    plan.validate()
    if settings.max_size is not None and plan.bytes_to_send > settings.max_size:
        raise SizeLimitExceeded(
            f"{plan.bytes_to_send} bytes to send from {source_path!r} on node "
            f"{source_node_id} exceed max_size={settings.max_size}; raise it or exclude files"
        )
    specs = layout([e.size for e in plan.send], settings.chunk_size)
    yield Started(plan.bytes_to_send, len(plan.send), len(specs))
    writer.begin(plan)
    try:
        if specs:
            frames = _read_task.options(
                **on_source,
                num_returns="streaming",
                _generator_backpressure_num_objects=1,
            ).remote(source_path, plan.send, specs)
            for ref in _prefetched(frames, settings.max_in_flight):
                frame = _get(ref)
                nbytes, files = writer.write(frame)
                del frame, ref
                yield Landed(nbytes, files)
        result = writer.commit()
    except BaseException:
        writer.abort()
        raise
    yield Finished(result, len(plan.deleted), len(specs))


def _get(ref: Any) -> Any:
    """``ray.get`` that surfaces a remote TransferError as itself, not wrapped."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as err:
        if isinstance(err.cause, TransferError):
            raise err.cause from None
        raise


def _prefetched(frames: Any, window: int) -> Iterator[Any]:
    """Yield frame refs in order, each already pulled to this node, pulling up to
    ``window`` frames ahead of the consumer in a background thread."""
    refs: queue.Queue[Any] = queue.Queue(maxsize=max(1, window - 1))
    stop = threading.Event()

    def pump() -> None:
        try:
            for ref in frames:
                ray.wait([ref], num_returns=1, fetch_local=True)
                while not stop.is_set():
                    try:
                        refs.put(ref, timeout=0.2)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            refs.put(_END)
        except BaseException as err:  # handed to the consumer, re-raised there
            refs.put(err)

    thread = threading.Thread(target=pump, name="transfer-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = refs.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        if thread.is_alive():
            stop.set()
            ray.cancel(frames, force=True)
            while thread.is_alive():
                try:
                    refs.get(timeout=0.2)
                except queue.Empty:
                    pass


receive_task: Any = ray.remote(receive)
