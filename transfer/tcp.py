"""The direct byte path of a cross-node copy: one authenticated TCP stream of frames.

Why not the object store for the bytes: every frame put into it stays in the shared
memory of *both* nodes until the source raylet deletes freed objects, which it does in
batches (``free_objects_period_milliseconds``, 1 s by default, or every 100 objects),
and Ray offers no public call to free an object sooner. So the store pages touched grow
with throughput times that period (measured here: ~220 MiB per node at 250 MB/s, against
a 32 MiB window), and chunks small enough for the 100-object batch to bound it cost
milliseconds of CPU each in raylets and workers. Each frame also crosses three more
copies (into the store, through the raylets' gRPC, into the other store).

So the receiving task listens on its node's Ray address, hands the address and a random
32-byte token to the reader task (through Ray, like any task argument), and the reader
connects, proves the token, and streams length-prefixed frames. The frames are the same
as over the object store, so everything the sink checks (header, file order, offsets,
every file's checksum) is checked the same way; the token only keeps strangers from
feeding the sink. Memory is ``max_in_flight`` frame buffers on each side, whatever the
copy's size. Ray still supervises both tasks: if the connection breaks, the receiver
asks Ray what happened to the reader, so a dead node is reported as such.

When the reader cannot connect (a firewall between nodes), the copy falls back to the
object store path; so does a cluster with ``RAY_USE_TLS`` (this stream is not
encrypted) or ``TRANSFER_DIRECT=0`` in the receiving worker's environment.
"""

from __future__ import annotations

import hmac
import mmap
import os
import queue
import secrets
import socket
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import ray

from .chunks import ChunkSpec
from .errors import TransferError, TransferIntegrityError
from .handoff import END, drain

__all__ = [
    "DirectUnavailable",
    "Frame",
    "Listener",
    "direct_enabled",
    "receive_stream",
    "send_stream",
]

TOKEN_SIZE = 32
_LEN = struct.Struct("<Q")
_POLL = 0.5  # seconds between checks of the peer task / stop flag while blocked
_CONNECT_TIMEOUT = 20.0
_HELLO_TIMEOUT = 10.0
_SOCK_BUF = 4 * 1024 * 1024


class DirectUnavailable(TransferError):
    """The reader could not reach the receiver's socket; use the object store path."""


def direct_enabled() -> bool:
    def off(name: str, default: str) -> bool:
        return os.environ.get(name, default).strip().lower() in ("0", "false", "no", "off")

    tls = not off("RAY_USE_TLS", "0")
    return not tls and not off("TRANSFER_DIRECT", "1")


def _tune(sock: socket.socket) -> None:
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, _SOCK_BUF)
        except OSError:
            pass


class Listener:
    """The receiver's listening socket on this node's Ray address, for one sender."""

    def __init__(self) -> None:
        host = ray.util.get_node_ip_address()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            _tune(self._sock)
            self._sock.bind((host, 0))
            self._sock.listen(8)
            self._sock.settimeout(_POLL)
        except BaseException:
            self._sock.close()
            raise
        self.address: tuple[str, int] = (host, self._sock.getsockname()[1])
        self.token = secrets.token_bytes(TOKEN_SIZE)

    def accept(self, sender_running: Callable[[], bool]) -> socket.socket:
        """The first connection that proves the token. Returns ``None``-free: raises
        ``ConnectionError`` once the sender task is over without having connected."""
        while True:
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                if not sender_running():
                    raise ConnectionError("the reader task ended without connecting") from None
                continue
            try:
                conn.settimeout(_HELLO_TIMEOUT)
                hello = _recv_exact(conn, TOKEN_SIZE)
            except OSError:
                conn.close()
                continue
            if hello is not None and hmac.compare_digest(hello, self.token):
                conn.settimeout(_POLL)
                return conn
            conn.close()  # not our reader: ignore it

    def close(self) -> None:
        self._sock.close()


def _recv_exact(conn: socket.socket, n: int) -> bytes | None:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = conn.recv_into(view[got:])
        if k == 0:
            return None
        got += k
    return bytes(buf)


def send_stream(
    address: tuple[str, int],
    token: bytes,
    specs: Sequence[ChunkSpec],
    read: Callable[[ChunkSpec, memoryview], memoryview],
    window: int,
) -> None:
    """Connect to the receiver and send the frame of each of ``specs`` in order, as
    ``read(spec, buffer)`` fills it; a thread reads up to ``window`` frames ahead of the
    socket into reused buffers."""
    try:
        conn = socket.create_connection(address, timeout=_CONNECT_TIMEOUT)
    except OSError as err:
        raise DirectUnavailable(f"cannot reach {address[0]}:{address[1]}: {err}") from err
    stop = threading.Event()
    thread: threading.Thread | None = None
    try:
        _tune(conn)
        conn.settimeout(None)
        conn.sendall(token)
        size = max((s.frame_size for s in specs), default=1)
        free: queue.Queue[mmap.mmap] = queue.Queue()
        for _ in range(max(2, window)):
            free.put(mmap.mmap(-1, size))
        full: queue.Queue[object] = queue.Queue()

        def fill() -> None:
            try:
                for spec in specs:
                    buf = _take(free, stop)
                    if buf is None:
                        return
                    full.put(read(spec, memoryview(buf)))
                full.put(END)
            except BaseException as err:  # handed to the sending loop, re-raised there
                full.put(err)

        thread = threading.Thread(target=fill, name="transfer-read", daemon=True)
        thread.start()
        for item in drain(full):
            assert isinstance(item, memoryview)
            conn.sendall(_LEN.pack(item.nbytes))
            conn.sendall(item)
            free.put(item.obj)  # type: ignore[arg-type]
            del item
        conn.shutdown(socket.SHUT_WR)
        # The receiver closes once it has every frame: wait for that, so that this task
        # ends only after the bytes are in the receiver's hands. (Should the receiver
        # die instead, Ray kills this task with its owner.)
        conn.settimeout(None)
        conn.recv(1)
    finally:
        stop.set()
        if thread is not None:
            thread.join()
        conn.close()


def _take(q: queue.Queue[mmap.mmap], stop: threading.Event) -> mmap.mmap | None:
    while not stop.is_set():
        try:
            return q.get(timeout=_POLL)
        except queue.Empty:
            continue
    return None


class Frame(NamedTuple):
    """A received frame in a page-aligned buffer, lent until ``release()`` is called."""

    view: memoryview
    release: Callable[[], None]


def receive_stream(
    conn: socket.socket,
    specs: Sequence[ChunkSpec],
    window: int,
    sender_running: Callable[[], bool],
) -> Iterator[Frame]:
    """Yield each frame of ``specs`` in order; a thread receives ahead into ``window``
    reused buffers, so it waits once the consumer holds them all unreleased."""
    if window < 1:
        raise ValueError("window must be at least 1")
    if not specs:
        return
    size = max(s.frame_size for s in specs)
    bufs = [mmap.mmap(-1, size) for _ in range(window)]
    free: queue.Queue[mmap.mmap] = queue.Queue()
    for b in bufs:
        free.put(b)
    full: queue.Queue[object] = queue.Queue()
    stop = threading.Event()

    def recv_into(view: memoryview) -> None:
        got = 0
        while got < view.nbytes:
            if stop.is_set():
                raise ConnectionError("receiving stopped")
            try:
                k = conn.recv_into(view[got:])
            except TimeoutError:
                if not sender_running():
                    raise ConnectionError("the reader task ended mid-stream") from None
                continue
            if k == 0:
                raise ConnectionError("the reader closed the connection mid-stream")
            got += k

    def pump() -> None:
        head = memoryview(bytearray(_LEN.size))
        try:
            for spec in specs:
                buf = _take(free, stop)
                if buf is None:
                    return
                recv_into(head)
                (n,) = _LEN.unpack(head)
                if n != spec.frame_size:
                    raise TransferIntegrityError(
                        f"chunk {spec.index} announced as {n} bytes, expected {spec.frame_size}"
                    )
                view = memoryview(buf)[:n]
                recv_into(view)
                full.put(view)
            full.put(END)
        except BaseException as err:
            full.put(err)

    thread = threading.Thread(target=pump, name="transfer-recv", daemon=True)
    thread.start()
    try:
        for item in drain(full):
            assert isinstance(item, memoryview)
            buf = item.obj
            yield Frame(item, lambda buf=buf: free.put(buf))  # type: ignore[misc]
            del item, buf
    finally:
        stop.set()
        thread.join()
