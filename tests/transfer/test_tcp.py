"""The direct byte stream (``transfer.tcp``) between a source reader and a sink, without
Ray tasks: a real copy over a local socket, strangers ignored, a missing receiver, a
stream cut short."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from transfer.chunks import ChunkSpec, layout
from transfer.delta import Plan, make_plan
from transfer.errors import TransferIntegrityError
from transfer.listing import EntryKind
from transfer.sink import SinkWriter
from transfer.source import SourceReader
from transfer.tcp import (
    TOKEN_SIZE,
    DirectUnavailable,
    Listener,
    receive_stream,
    send_stream,
)

from .helpers import make_tree, siblings, snapshot

CHUNK = 64 * 1024


def _reading(
    tmp_path: Path, big_size: int = 700_000
) -> tuple[Path, Path, SourceReader, SinkWriter, Plan, list[ChunkSpec], Listener]:
    """A source tree, its copy plan to an empty destination, the reader started on it,
    and a listener for the stream."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src, big_size=big_size)
    reader, sink = SourceReader(str(src)), SinkWriter(str(dst), "t")
    plan = make_plan(reader.scan(), sink.scan(), delta=True, mirror=False)
    reader.start(plan.send)
    return src, dst, reader, sink, plan, layout([e.size for e in plan.send], CHUNK), Listener()


# A 6 MiB file is written with O_DIRECT straight from the receive buffers, which the sink
# holds until its writes are done: with two buffers it may hold only one, or the stream
# and the sink would wait for each other forever.
@pytest.mark.parametrize(("window", "big_size"), [(3, 700_000), (2, 6 * 1024 * 1024)])
def test_copy_over_a_socket_ignores_strangers(tmp_path: Path, window: int, big_size: int) -> None:
    src, dst, reader, sink, plan, specs, listener = _reading(tmp_path, big_size)
    stranger = socket.create_connection(listener.address)
    stranger.sendall(b"x" * TOKEN_SIZE)  # wrong token: dropped, the real reader accepted
    errors: list[BaseException] = []

    def send() -> None:
        try:
            send_stream(listener.address, listener.token, specs, reader.read_into, 3)
        except BaseException as err:
            errors.append(err)

    thread = threading.Thread(target=send)
    thread.start()
    conn = listener.accept(thread.is_alive)
    listener.close()
    sink.begin(plan)
    for frame in receive_stream(conn, specs, window, thread.is_alive):
        sink.write(frame.view, frame.release, hold=window - 1)
    conn.close()
    thread.join(30)
    stranger.close()
    assert errors == []
    result = sink.commit()
    assert result.files_written == sum(e.kind is EntryKind.FILE for e in plan.send)
    assert snapshot(dst) == snapshot(src) and siblings(dst) == []
    assert len(specs) > 10


def test_no_receiver_means_direct_unavailable(tmp_path: Path) -> None:
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    address = free.getsockname()
    free.close()  # nobody listens there now
    with pytest.raises(DirectUnavailable):
        send_stream(address, b"t" * TOKEN_SIZE, [], lambda s, b: b, 2)


def test_a_stream_cut_short_is_an_error_not_a_short_copy(tmp_path: Path) -> None:
    _src, _dst, reader, _sink, _plan, specs, listener = _reading(tmp_path)
    sender = socket.create_connection(listener.address)
    sender.sendall(listener.token)
    conn = listener.accept(lambda: True)
    listener.close()
    frame = reader.read(specs[0])
    sender.sendall(len(frame).to_bytes(8, "little") + bytes(frame))
    sender.sendall((specs[1].frame_size + 1).to_bytes(8, "little"))  # a lie
    with pytest.raises(TransferIntegrityError, match="announced"):
        for _ in receive_stream(conn, specs, 2, lambda: True):
            pass
    sender.close()
    conn.close()
    # and an early close
    listener = Listener()
    sender = socket.create_connection(listener.address)
    sender.sendall(listener.token)
    conn = listener.accept(lambda: True)
    listener.close()
    sender.sendall(len(frame).to_bytes(8, "little") + bytes(frame)[:100])
    sender.close()
    with pytest.raises(ConnectionError):
        for _ in receive_stream(conn, specs, 2, lambda: True):
            pass
    conn.close()
