"""Chunk layout and framing: how a list of files becomes a stream of bounded frames.

Layout: files are packed in order into chunks of at most ``chunk_size`` payload bytes;
a big file is split across consecutive chunks, small files share one, so memory per
chunk is bounded whatever the file sizes and tiny files do not cost one round trip
each. Every file, even an empty one, has a piece flagged ``last`` that carries the
file's transit check (:mod:`transfer.checksum`), so the sink verifies each file the
moment it is complete.

Framing: one chunk travels as one flat ``uint8`` buffer (header, then payload), which
Ray stores and maps zero-copy. The header is ``struct``-packed, not pickled, so a
crafted frame can at worst be rejected by :func:`decode`, never execute anything.

Alignment, so that the sink can hand big files' bytes to ``O_DIRECT`` writes straight
from the buffer a frame was received into (no copy): the header is zero-padded to a
multiple of ``ALIGN`` bytes, and a file of ``BIG_FILE`` bytes or more starts a chunk of
its own, so each of its pieces begins a payload and, with a ``chunk_size`` that is a
multiple of ``ALIGN``, at an aligned offset of the file. Any other layout is still valid;
the sink then copies the bytes into an aligned buffer first.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from .checksum import CHECK_SIZE
from .errors import TransferIntegrityError

__all__ = [
    "ALIGN",
    "BIG_FILE",
    "ChunkSpec",
    "FramePiece",
    "Piece",
    "decode",
    "encode_header",
    "header_size",
    "layout",
]

MAGIC = b"TFC2"
_HEAD = struct.Struct("<4sI")  # magic, number of pieces
_PIECE = struct.Struct(f"<IQQB{CHECK_SIZE}s")  # file id, offset, length, flags, check
_LAST = 1
#: Payloads start at a multiple of this (the block size ``O_DIRECT`` needs).
ALIGN = 4096
#: Files this big start a chunk of their own (and the sink writes them with O_DIRECT).
BIG_FILE = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Piece:
    """``length`` bytes of file ``file_id`` starting at ``offset``."""

    file_id: int
    offset: int
    length: int
    last: bool


@dataclass(frozen=True, slots=True)
class ChunkSpec:
    index: int
    pieces: tuple[Piece, ...]
    nbytes: int

    @property
    def frame_size(self) -> int:
        return header_size(len(self.pieces)) + self.nbytes


@dataclass(frozen=True, slots=True)
class FramePiece:
    file_id: int
    offset: int
    length: int
    last: bool
    digest: bytes
    start: int  # where the piece's bytes begin in the frame


def header_size(n_pieces: int) -> int:
    """Bytes before the payload: the header, zero-padded to a multiple of ``ALIGN``."""
    return -(-(_HEAD.size + n_pieces * _PIECE.size) // ALIGN) * ALIGN


def layout(sizes: Sequence[int], chunk_size: int, big_file: int = BIG_FILE) -> list[ChunkSpec]:
    """Pack files (by size, in order) into chunks of at most ``chunk_size`` payload; a
    file of ``big_file`` bytes or more starts a new chunk."""
    if chunk_size <= 0:
        raise ValueError("chunk_size must be positive")
    chunks: list[ChunkSpec] = []
    pieces: list[Piece] = []
    used = 0
    # Many empty files must not make one header unbounded either.
    max_pieces = max(1, chunk_size // _PIECE.size)

    def flush() -> None:
        nonlocal pieces, used
        if pieces:
            chunks.append(ChunkSpec(len(chunks), tuple(pieces), used))
            pieces, used = [], 0

    for file_id, size in enumerate(sizes):
        offset = 0
        if size >= big_file:
            flush()
        while True:
            if used >= chunk_size or len(pieces) >= max_pieces:
                flush()
            take = min(size - offset, chunk_size - used)
            last = offset + take == size
            pieces.append(Piece(file_id, offset, take, last))
            used += take
            offset += take
            if last:
                break
    flush()
    return chunks


def encode_header(buf: memoryview, pieces: Sequence[Piece], digests: Sequence[bytes]) -> None:
    """Write the header for ``pieces`` (and its zero padding) at the start of ``buf``;
    ``digests[i]`` is the file's transit check for last pieces (ignored otherwise)."""
    _HEAD.pack_into(buf, 0, MAGIC, len(pieces))
    pos = _HEAD.size
    for piece, digest in zip(pieces, digests, strict=True):
        flags = _LAST if piece.last else 0
        _PIECE.pack_into(buf, pos, piece.file_id, piece.offset, piece.length, flags, digest)
        pos += _PIECE.size
    end = header_size(len(pieces))
    buf[pos:end] = bytes(end - pos)


def decode(frame: memoryview) -> list[FramePiece]:
    """Parse and check a frame's header. Bounds only: whether pieces fit the plan is the
    sink's job. Raises TransferIntegrityError on anything malformed."""
    if frame.nbytes < _HEAD.size:
        raise TransferIntegrityError(f"chunk frame too short ({frame.nbytes} bytes)")
    magic, n = _HEAD.unpack_from(frame, 0)
    if magic != MAGIC:
        raise TransferIntegrityError(f"chunk frame has a bad magic {magic!r}")
    if header_size(n) > frame.nbytes:
        raise TransferIntegrityError(
            f"chunk frame announces {n} pieces but is {frame.nbytes} bytes"
        )
    out: list[FramePiece] = []
    start = header_size(n)
    pos = _HEAD.size
    for _ in range(n):
        file_id, offset, length, flags, digest = _PIECE.unpack_from(frame, pos)
        pos += _PIECE.size
        if flags not in (0, _LAST):
            raise TransferIntegrityError(f"chunk frame piece has unknown flags {flags}")
        out.append(FramePiece(file_id, offset, length, flags == _LAST, digest, start))
        start += length
    if start != frame.nbytes:
        raise TransferIntegrityError(
            f"chunk frame payload is {frame.nbytes - header_size(n)} bytes, "
            f"pieces announce {start - header_size(n)}"
        )
    return out
