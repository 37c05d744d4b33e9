"""Chunk layout and framing, without Ray."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transfer.checksum import CHECK_SIZE
from transfer.chunks import ALIGN, Piece, decode, encode_header, header_size, layout
from transfer.errors import TransferIntegrityError


@settings(deadline=None, max_examples=80)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=5000), max_size=40),
    chunk=st.integers(min_value=60, max_value=3000),
)
def test_layout_covers_every_file_exactly_once_in_bounded_chunks(
    sizes: list[int], chunk: int
) -> None:
    chunks = layout(sizes, chunk)
    seen: dict[int, int] = {}
    for i, spec in enumerate(chunks):
        assert spec.index == i
        assert 0 < len(spec.pieces)
        assert spec.nbytes == sum(p.length for p in spec.pieces) <= chunk
        for p in spec.pieces:
            assert p.offset == seen.get(p.file_id, 0)  # contiguous, in order
            seen[p.file_id] = p.offset + p.length
            assert p.last == (seen[p.file_id] == sizes[p.file_id])
    assert seen == dict(enumerate(sizes))
    assert [p.file_id for s in chunks for p in s.pieces if p.last] == list(range(len(sizes)))


def test_small_files_share_a_chunk_and_big_ones_split() -> None:
    chunks = layout([10, 10, 10, 100], 400)
    assert [len(c.pieces) for c in chunks] == [4]
    chunks = layout([100, 1000, 10], 400)
    assert [len(c.pieces) for c in chunks] == [2, 1, 2]
    assert [c.nbytes for c in chunks] == [400, 400, 310]


def test_big_files_start_a_chunk_so_their_pieces_start_payloads() -> None:
    chunks = layout([10, 5000, 10, 10, 4096], 4096, big_file=4096)
    assert [[(p.file_id, p.offset, p.length) for p in c.pieces] for c in chunks] == [
        [(0, 0, 10)],
        [(1, 0, 4096)],
        [(1, 4096, 904), (2, 0, 10), (3, 0, 10)],
        [(4, 0, 4096)],
    ]


def _frame(pieces: list[Piece], payload: bytes) -> bytearray:
    buf = bytearray(header_size(len(pieces)) + len(payload))
    encode_header(memoryview(buf), pieces, [bytes([i]) * CHECK_SIZE for i in range(len(pieces))])
    buf[header_size(len(pieces)) :] = payload
    return buf


def test_frame_round_trip() -> None:
    pieces = [Piece(0, 0, 3, True), Piece(1, 0, 0, True), Piece(2, 0, 2, False)]
    frame = _frame(pieces, b"abcde")
    out = decode(memoryview(frame))
    assert [(p.file_id, p.offset, p.length, p.last) for p in out] == [
        (0, 0, 3, True),
        (1, 0, 0, True),
        (2, 0, 2, False),
    ]
    assert bytes(frame[out[2].start : out[2].start + 2]) == b"de"
    assert out[1].digest == bytes([1]) * CHECK_SIZE
    assert out[0].start == header_size(3) == ALIGN  # the payload starts aligned
    assert bytes(frame[8 + 3 * 37 : ALIGN]) == bytes(ALIGN - 8 - 3 * 37)  # zero padding


@pytest.mark.parametrize(
    "mutate",
    [
        lambda f: f[:3],  # truncated header
        lambda f: b"XXXX" + f[4:],  # bad magic
        lambda f: f[:4] + struct.pack("<I", 10**6) + f[8:],  # absurd piece count
        lambda f: f + b"extra",  # payload longer than announced
        lambda f: f[:-1],  # payload shorter than announced
    ],
)
def test_malformed_frames_are_rejected(mutate: object) -> None:
    frame = bytes(_frame([Piece(0, 0, 3, True)], b"abc"))
    with pytest.raises(TransferIntegrityError):
        decode(memoryview(mutate(frame)))  # type: ignore[operator]


def test_unknown_flags_are_rejected() -> None:
    frame = _frame([Piece(0, 0, 3, True)], b"abc")
    frame[8 + 4 + 8 + 8] = 7
    with pytest.raises(TransferIntegrityError, match="flags"):
        decode(memoryview(frame))
