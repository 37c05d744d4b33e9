"""A real, small filesystem for disk-full tests: a tmpfs of a few MiB, mounted for one
test and filled on purpose, so ``ENOSPC`` comes from the kernel, not from a mock.

Mounting takes root (or CAP_SYS_ADMIN); where the test runner has neither, the tests
that need it are skipped with that reason. ``tests/storage/test_full.py`` also covers
the same mapping without root, through ``RLIMIT_FSIZE`` (``EFBIG``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_filesystem(path: Path, size: int) -> Iterator[Path]:
    """A tmpfs of ``size`` bytes mounted at ``path`` (created) until the block ends."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("a small filesystem for disk-full tests needs root to mount a tmpfs")
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(path: Path, leave: int) -> Path:
    """Fill the filesystem holding ``path`` with one file until ``leave`` bytes are free;
    delete the returned file to free the space again."""
    filler = path / "filler"
    with open(filler, "wb") as fh:
        fh.write(b"\0" * max(0, free_bytes(path) - leave))
    return filler
