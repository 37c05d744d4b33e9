"""The driver's large C blocks get pages of their own (issue 36, item 3;
``engine/c_heap.py``): glibc must not move them into the heap, where the driver's
growing ones (a journal write's head) grew its RSS with every write."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.engine import c_heap

from ..support import REPO_ROOT
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


_PROBE = """
import ctypes, sys
from tests.engine.test_c_heap import _glibc, _mapped_blocks
from orchestrator.engine.c_heap import LARGE_BLOCK, keep_large_blocks_apart
libc = _glibc()
if sys.argv[1] == "kept apart":
    assert keep_large_blocks_apart()
big = libc.malloc(8 * 2**20)  # mapped; freeing it would raise glibc's threshold to 8 MiB
libc.free(big)
before = _mapped_blocks(libc)
block = libc.malloc(2 * LARGE_BLOCK)  # ...and this one would come from the heap
mapped = _mapped_blocks(libc) - before
libc.free(block)
small = libc.malloc(LARGE_BLOCK // 4)
print(mapped, _mapped_blocks(libc) - before)
"""


def _blocks_mapped(how: str) -> list[int]:
    """In a fresh process (the heap of one that ran other tests may serve a large block
    from free memory it holds, whatever the threshold): blocks mapped for a large and a
    small block, after a larger one was freed."""
    _glibc()
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, how],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [int(n) for n in done.stdout.split()]


def test_a_freed_large_block_does_not_move_the_next_ones_into_the_heap() -> None:
    assert _blocks_mapped("kept apart") == [1, 0]  # a large block: pages of its own
    assert _blocks_mapped("as glibc starts") == [0, 0]  # what the threshold fixed


async def test_entering_an_experiment_keeps_large_blocks_apart(
    tmp_path: Path, orchestrator: MakeOrchestrator, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[bool] = []
    monkeypatch.setattr(c_heap, "keep_large_blocks_apart", lambda: asked.append(True) or True)
    async with orchestrator(storage=tmp_path, name="heap", progress=False):
        assert asked
