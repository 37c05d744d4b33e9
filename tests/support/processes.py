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


def kill_tree(pid: int) -> list[str]:
    """SIGKILL ``pid`` and its descendants; wait for the descendants (the caller waits
    for ``pid`` through its own handle). The descendants' command lines, read before
    the kill; nothing for a process already gone."""
    try:
        root = psutil.Process(pid)
        descendants = root.children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    commands = [_command(p) for p in descendants]
    for victim in [root, *descendants]:
        try:
            victim.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(descendants, timeout=30)
    return commands


def ray_started_by(commands: list[str]) -> bool:
    """Whether these command lines (from :func:`kill_tree`) include a raylet."""
    return any("raylet" in command for command in commands)


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
