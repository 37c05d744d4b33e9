"""The Ray tasks of a cross-node copy; the receiving task conducts it from the target.

Why tasks, not actors: an actor gets a freshly started worker process (measured here:
seconds of start-up under load and ~100 MiB each), while a task runs in one of the
node's already started pooled workers. So a copy is:

* ``receive`` - a streaming-generator task pinned to the target node. It lists both
  sides, plans the delta, checks ``max_size``, then consumes the source's frames and
  writes them with :class:`~transfer.sink.SinkWriter`, yielding small progress events
  to the driver, which only ever awaits those.
* ``send_frames`` - a task pinned to the source node, started by ``receive``, that
  connects back to it and streams the frames over one TCP connection
  (:mod:`transfer.tcp`, which says why the bytes avoid the object store). Both ends
  read or receive at most ``max_in_flight`` frames ahead, into reused buffers.
* ``read_frames`` - the fallback when the reader cannot connect (or direct streams are
  disabled): a streaming-generator task whose frames travel through the object store;
  Ray's generator backpressure holds it ``max_in_flight`` frames ahead, and a prefetch
  thread in ``receive`` pulls that many frames concurrently while one is written.
* ``scan_source`` / ``digest_source`` - short tasks on the source node for the plan.

The ``receive`` worker owns the reading task; if it dies (target node lost, copy
cancelled), Ray kills the reading task with it. If the source side dies, the broken
stream makes ``receive`` ask Ray what became of the reader, so the driver sees the
node's death, not a socket error.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from .chunks import ChunkSpec, layout
from .delta import make_plan, needs_checksum
from .errors import SizeLimitExceeded, TransferError
from .from_store import ContentStore, close_found, split_plan
from .handoff import END, drain
from .listing import Entry
from .sink import CommitResult, SinkWriter
from .source import SourceReader
from .tcp import DirectUnavailable, Listener, direct_enabled, receive_stream, send_stream

__all__ = ["Finished", "Landed", "Settings", "Started", "pinned", "receive_task"]

#: Progress events to the driver: at most one per this many seconds.
_PROGRESS_EVERY = 0.05
#: How long a broken stream waits for Ray to report what happened to the reader.
_SENDER_GRACE = 30.0


@dataclass(frozen=True, slots=True)
class Settings:
    chunk_size: int
    max_in_flight: int
    delta: bool
    mirror: bool
    always_checksum: bool
    max_size: int | None
    exclude: tuple[str, ...]
    #: Bytes over a direct TCP stream (see :mod:`transfer.tcp`), else the object store.
    direct: bool = True
    #: Files the target's blob store holds are copied from it, not sent (transfer.from_store).
    store: ContentStore | None = None


@dataclass(frozen=True, slots=True)
class Started:
    bytes_total: int
    files_total: int
    chunks_total: int


@dataclass(frozen=True, slots=True)
class Landed:
    nbytes: int
    files: int
    chunks: int = 1


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


def send_frames(
    root: str,
    files: Sequence[Entry],
    specs: Sequence[ChunkSpec],
    address: tuple[str, int],
    token: bytes,
    window: int,
) -> None:
    reader = SourceReader(root)
    reader.start(files)
    send_stream(address, token, specs, reader.read_into, window)


_read_task: Any = ray.remote(read_frames)
_send_task: Any = ray.remote(send_frames)


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
    plan, found = split_plan(plan, settings.store)
    if settings.max_size is not None and plan.bytes_to_send > settings.max_size:
        close_found(found)
        raise SizeLimitExceeded(
            f"{plan.bytes_to_send} bytes to send from {source_path!r} on node "
            f"{source_node_id} exceed max_size={settings.max_size}; raise it or exclude files"
        )
    specs = layout([e.size for e in plan.send], settings.chunk_size)
    try:
        yield Started(plan.bytes_to_send, len(plan.send), len(specs))
        writer.begin(plan)
    except BaseException:
        close_found(found)
        raise
    try:
        writer.copy_from_store(found)
        if specs:
            landed = _receive_direct if settings.direct and direct_enabled() else _receive_stored
            try:
                yield from _coalesced(
                    landed(writer, source_node_id, source_path, plan.send, specs, settings)
                )
            except DirectUnavailable:
                if writer.bytes_written:
                    raise
                yield from _coalesced(
                    _receive_stored(writer, source_node_id, source_path, plan.send, specs, settings)
                )
        result = writer.commit()
    except BaseException:
        writer.abort()
        raise
    yield Finished(result, len(plan.deleted), len(specs))


def _receive_direct(
    writer: SinkWriter,
    source_node_id: str,
    source_path: str,
    files: Sequence[Entry],
    specs: Sequence[ChunkSpec],
    settings: Settings,
) -> Iterator[Landed]:
    """Frames over one TCP stream from a ``send_frames`` task (see :mod:`transfer.tcp`).
    Raises DirectUnavailable before any byte arrived if the reader cannot connect."""
    listener = Listener()
    sender: Any = None
    conn = None
    try:
        sender = _send_task.options(**pinned(source_node_id)).remote(
            source_path, files, specs, listener.address, listener.token, settings.max_in_flight
        )

        def running() -> bool:
            ready, _ = ray.wait([sender], timeout=0, fetch_local=False)
            return not ready

        try:
            conn = listener.accept(running)
        except ConnectionError:
            _get(sender)  # raises what stopped the reader (DirectUnavailable if no route)
            raise
        finally:
            listener.close()
        try:
            window = max(2, settings.max_in_flight)
            for frame in receive_stream(conn, specs, window, running):
                # One buffer always stays free for the stream, else both ends would wait.
                nbytes, files_done = writer.write(frame.view, frame.release, hold=window - 1)
                del frame
                yield Landed(nbytes, files_done)
        except (OSError, EOFError) as err:
            _raise_sender_failure(sender, err)
        conn.close()
        conn = None
        _get(sender)
    except BaseException:
        if sender is not None:
            ray.cancel(sender, force=True)
        raise
    finally:
        if conn is not None:
            conn.close()
        listener.close()


def _raise_sender_failure(sender: Any, err: BaseException) -> None:
    """The stream broke: report why the reader stopped (its own error, or Ray's word on
    its node's death) when Ray knows it soon, else the broken connection."""
    ready, _ = ray.wait([sender], timeout=_SENDER_GRACE, fetch_local=False)
    if ready:
        _get(sender)
    raise TransferError(
        f"the byte stream from the source broke mid-copy ({err}); the target is unchanged"
    ) from err


def _receive_stored(
    writer: SinkWriter,
    source_node_id: str,
    source_path: str,
    files: Sequence[Entry],
    specs: Sequence[ChunkSpec],
    settings: Settings,
) -> Iterator[Landed]:
    """Frames through the object store from a ``read_frames`` streaming task."""
    frames = _read_task.options(
        **pinned(source_node_id),
        num_returns="streaming",
        _generator_backpressure_num_objects=settings.max_in_flight,
    ).remote(source_path, files, specs)
    for ref in _prefetched(frames, settings.max_in_flight):
        frame = _get(ref)
        nbytes, files_done = writer.write(frame, _nothing)  # held by the writer till written
        del frame, ref
        yield Landed(nbytes, files_done)


def _coalesced(events: Iterator[Landed], interval: float = _PROGRESS_EVERY) -> Iterator[Landed]:
    """The frames' events summed: the first at once, then at most one per ``interval``
    seconds, and the last. Each event is a round trip through Ray to the driver, and the
    driver's backpressure paced the copy by its loop, frame by frame: one event per 8 MiB
    frame held a 512 MiB copy to 1.1-1.2 s where it now takes 0.6-0.9 s."""
    nbytes = files = chunks = 0
    last = -interval
    for event in events:
        nbytes, files, chunks = nbytes + event.nbytes, files + event.files, chunks + 1
        now = time.monotonic()
        if now - last >= interval:
            yield Landed(nbytes, files, chunks)
            nbytes = files = chunks = 0
            last = now
    if chunks:
        yield Landed(nbytes, files, chunks)


def _nothing() -> None:
    pass


def _get(ref: Any) -> Any:
    """``ray.get`` that surfaces a remote TransferError as itself, not wrapped."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as err:
        if isinstance(err.cause, TransferError):
            raise err.cause from None
        raise


def _prefetched(frames: Any, window: int) -> Iterator[Any]:
    """Yield frame refs in order, each already pulled to this node.

    A pump thread takes each ref the moment the reader yields it and starts pulling it
    at once (one ``ray.wait(fetch_local=True)`` per frame in a pool of ``window``
    threads), so up to ``window`` frames move concurrently: a pull's fixed latency
    (location lookup, push set-up) overlaps the others' bytes instead of adding up
    frame after frame. The hand-off queue holds at most ``window`` frames, which bounds
    what is pulled ahead of the writer.
    """
    refs: queue.Queue[Any] = queue.Queue(maxsize=window)
    stop = threading.Event()
    pulls = ThreadPoolExecutor(window, thread_name_prefix="transfer-pull")

    def pull(ref: Any) -> None:
        ray.wait([ref], num_returns=1, fetch_local=True)

    def hand_over(item: Any) -> bool:
        while not stop.is_set():
            try:
                refs.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def pump() -> None:
        try:
            for ref in frames:
                if not hand_over((ref, pulls.submit(pull, ref))):
                    return
            refs.put(END)
        except BaseException as err:  # handed to the consumer, re-raised there
            refs.put(err)

    thread = threading.Thread(target=pump, name="transfer-prefetch", daemon=True)
    thread.start()
    try:
        for item in drain(refs):
            ref, pulled = item
            pulled.result()
            del item, pulled
            yield ref
            del ref
    finally:
        if thread.is_alive():
            stop.set()
            ray.cancel(frames, force=True)
            while thread.is_alive():
                try:
                    refs.get(timeout=0.2)
                except queue.Empty:
                    pass
        pulls.shutdown(wait=False, cancel_futures=True)


receive_task: Any = ray.remote(receive)
