"""A line from a helper process back to the trial that started it: each message is
handed to the trial in its own thread, and answered with one word once the trial has
taken it.

Why it exists: a training function sometimes starts work in another process that
produces its results there (Ray Train's controller, an actor of its own, gets rank 0's
reports). The trial's actor is busy in the function's call meanwhile, and a Ray queue
actor between the two would cost one more worker process a trial (about a CPU-second
to start here). So the trial listens on a TCP socket of its node, and the helper
connects to it: Ray Train places its controller on the node of the process that calls
``fit()``, and the address is the node's own, so a helper elsewhere reaches it too.

The protocol, one connection at a time: the helper sends the :class:`Relay`'s token
(any other connection is closed unread), then frames (an 8-byte length and a pickle);
each frame is given to ``deliver`` in the relay's thread, which runs in the context
(``contextvars``) of the thread that made the relay, so ``report()`` there knows its
trial. The answer is one byte: :data:`GO` (taken: go on), :data:`STOP` (``deliver``
raised a ``BaseException`` that is not an ``Exception``: the trial is being unwound,
the helper should end its work) or :data:`ERROR` followed by a frame with the error's
text. ``deliver`` returns only when the trial asks for its next result, so the helper
is never more than one message ahead of the trial's decisions.

The relay ends when the thread that made it has ended (it looks every second), after a
STOP, or on :meth:`Relay.close`.
"""

from __future__ import annotations

import contextvars
import logging
import pickle
import secrets
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["ERROR", "GO", "STOP", "Relay", "RelayClosed", "Sender"]

log = logging.getLogger("orchestrator.integrations.relay")

GO, STOP, ERROR = b"g", b"s", b"e"

_LENGTH = struct.Struct("!Q")
#: Seconds between looks at whether the relay's maker is still alive.
_POLL_S = 1.0
#: Seconds a new connection may take to send its token.
_TOKEN_S = 30.0


class RelayClosed(ConnectionError):
    """The trial's end of the relay is gone (its process ended or it closed)."""


class Relay:
    """The trial's end: a listening socket and a daemon thread serving it.

    ``deliver(message)`` is called in the relay's thread for each message, in order.
    :attr:`sender` is what the helper process needs (picklable).
    """

    def __init__(self, deliver: Callable[[Any], None], *, name: str = "relay") -> None:
        self._deliver = deliver
        self._maker = threading.current_thread()
        self._closed = threading.Event()
        host = _node_address()
        self._server = socket.create_server((host, 0))
        self._server.settimeout(_POLL_S)
        self.sender = Sender((host, self._server.getsockname()[1]), secrets.token_bytes(16))
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._serve,), name=f"trialflow-{name}", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop listening (a connection being served ends after its message)."""
        self._closed.set()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _serve(self) -> None:
        try:
            while not self._closed.is_set() and self._maker.is_alive():
                try:
                    conn, _ = self._server.accept()
                except TimeoutError:
                    continue
                with conn:
                    try:
                        if not self._converse(conn):
                            return
                    except OSError as err:  # this connection broke: wait for another
                        log.debug("relay %s: a connection broke: %s", self._thread.name, err)
        except OSError as err:
            log.warning("relay %s stopped: %s", self._thread.name, err)
        finally:
            self._server.close()

    def _converse(self, conn: socket.socket) -> bool:
        """Serve one connection; False once the relay should end (after a STOP)."""
        conn.settimeout(_TOKEN_S)
        if _recv_exact(conn, len(self.sender.token)) != self.sender.token:
            return True
        conn.settimeout(None)
        while True:
            frame = _recv_frame(conn)
            if frame is None:
                return True
            try:
                self._deliver(pickle.loads(frame))
            except Exception as err:
                conn.sendall(ERROR + _frame(f"{type(err).__name__}: {err}".encode()))
            except BaseException:  # the trial is unwound: its helper should end
                conn.sendall(STOP)
                return False
            else:
                conn.sendall(GO)


class Sender:
    """The helper's end: connects on first use; ``send`` waits for the trial's answer.

    Pickles as its address and token only (a connection is per process)."""

    def __init__(self, address: tuple[str, int], token: bytes) -> None:
        self.address = address
        self.token = token
        self._conn: socket.socket | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"address": self.address, "token": self.token}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.address, self.token, self._conn = state["address"], state["token"], None

    def send(self, message: Any) -> bytes:
        """Send ``message``; returns GO or STOP. Raises :class:`RelayClosed` when the
        trial's end is gone, and RuntimeError with the trial's error text on ERROR."""
        data = _frame(pickle.dumps(message))
        try:
            conn = self._connect()
            conn.sendall(data)
            answer = _recv_exact(conn, 1)
            if answer == ERROR:
                text = _recv_frame(conn)
                raise RuntimeError((text or b"").decode(errors="replace"))
        except OSError as err:
            self.close()
            raise RelayClosed(f"the trial's relay at {self.address} is gone: {err}") from err
        if answer not in (GO, STOP):
            self.close()
            raise RelayClosed(f"the trial's relay at {self.address} closed the connection")
        return answer

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _connect(self) -> socket.socket:
        if self._conn is None:
            conn = socket.create_connection(self.address)
            conn.sendall(self.token)
            self._conn = conn
        return self._conn


def _node_address() -> str:
    """This node's address as Ray knows it (another node's helper reaches it), or the
    loopback outside Ray."""
    try:
        import ray

        if ray.is_initialized():
            return str(ray.util.get_node_ip_address())
    except Exception:
        pass
    return "127.0.0.1"


def _frame(payload: bytes) -> bytes:
    return _LENGTH.pack(len(payload)) + payload


def _recv_frame(conn: socket.socket) -> bytes | None:
    """One frame, or None at a clean end of the stream."""
    head = _recv_exact(conn, _LENGTH.size)
    if not head:
        return None
    (length,) = _LENGTH.unpack(head)
    return _recv_exact(conn, length)


def _recv_exact(conn: socket.socket, size: int) -> bytes:
    """``size`` bytes, or fewer when the peer closed (b"" at a clean end)."""
    chunks = bytearray()
    while len(chunks) < size:
        chunk = conn.recv(size - len(chunks))
        if not chunk:
            break
        chunks += chunk
    return bytes(chunks)
