"""The driver's large C blocks get pages of their own (issue 36, item 3;
``engine/c_heap.py``): glibc must not move them into the heap, where the driver's
growing ones (a journal write's head) grew its RSS with every write."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from orchestrator.engine.c_heap import LARGE_BLOCK, keep_large_blocks_apart

from ..support.fake_engine import MakeOrchestrator


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
        ).split()
    ]


def _glibc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallinfo2") or not hasattr(libc, "mallopt"):
        pytest.skip("not glibc 2.33 or later")
    libc.mallinfo2.restype = _Mallinfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


def _mapped_blocks(libc: ctypes.CDLL) -> int:
    return int(libc.mallinfo2().hblks)


async def test_a_freed_large_block_does_not_move_the_next_ones_into_the_heap(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    libc = _glibc()
    async with orchestrator(storage=tmp_path, name="heap", progress=False):
        # Entering the experiment fixed the threshold (this process's first entry did).
        # Freeing a mapped 8 MiB block would raise glibc's threshold to 8 MiB...
        big = libc.malloc(8 * 2**20)
        libc.free(big)
        # ...and this one would come from the heap; it has pages of its own.
        before = _mapped_blocks(libc)
        block = libc.malloc(2 * LARGE_BLOCK)
        try:
            assert _mapped_blocks(libc) == before + 1
        finally:
            libc.free(block)
        small = libc.malloc(LARGE_BLOCK // 4)  # a small one is still the heap's
        try:
            assert _mapped_blocks(libc) == before
        finally:
            libc.free(small)
    assert keep_large_blocks_apart()  # asked again: it is, nothing changes
