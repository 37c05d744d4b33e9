"""Ending what a test started: a process and every process it started in turn.

A driver script or a CLI run that starts its own Ray (GCS, raylet, workers) leaves
that Ray running when only the driver is killed: its processes outlive the test and
load the machine for every test after it. So a test kills the whole tree, found before
the kill (once the driver is dead its children are re-parented and no longer found).
"""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

import psutil

__all__ = ["end_tree", "kill_tree", "ray_started_by"]


def kill_tree(pid: int) -> list[psutil.Process]:
    """SIGKILL ``pid`` and its descendants; wait for the descendants (the caller waits
    for ``pid`` through its own handle). Does nothing for a process already gone."""
    try:
        root = psutil.Process(pid)
        descendants = root.children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    for victim in [root, *descendants]:
        try:
            victim.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(descendants, timeout=30)
    return descendants


def ray_started_by(descendants: list[psutil.Process]) -> bool:
    return any("raylet" in _command(p) for p in descendants)


async def end_tree(proc: subprocess.Popen[Any] | asyncio.subprocess.Process) -> None:
    """For a ``finally``: if ``proc`` still runs, kill it with its descendants, and
    reap it either way."""
    if isinstance(proc, subprocess.Popen):
        if proc.poll() is None:
            kill_tree(proc.pid)
        await asyncio.to_thread(proc.wait)
    else:
        if proc.returncode is None:
            kill_tree(proc.pid)
        await proc.wait()


def _command(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:  # gone, or a zombie
        return ""
