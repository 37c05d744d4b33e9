"""Who holds a lease: this driver process as a :class:`Holder`, and whether another
holder's process still runs (read from ``/proc``; kept apart from
:mod:`orchestrator.api.lease`, which does the lease's storage I/O)."""

from __future__ import annotations

import getpass
import os
import socket

from orchestrator.core.lease_record import Holder, same_process_space

__all__ = ["holder_alive", "this_process"]


def this_process(token: str) -> Holder:
    return Holder(
        host=socket.gethostname(),
        pid=os.getpid(),
        user=_user(),
        token=token,
        boot_id=_read("/proc/sys/kernel/random/boot_id"),
        pid_ns=_readlink("/proc/self/ns/pid"),
        started=_start_time(os.getpid()),
    )


def holder_alive(holder: Holder, me: Holder) -> bool | None:
    """Whether ``holder``'s process runs; None when ``me`` cannot see its processes."""
    if not same_process_space(holder, me):
        return None
    started = _start_time(holder.pid)
    if started is None:
        return False
    return holder.started is None or started == holder.started


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), or None."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    fields = text.rpartition(")")[2].split()  # after the command name, which may hold spaces
    return fields[19] if len(fields) > 19 else None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name for this uid (a container)
        return str(os.getuid()) if hasattr(os, "getuid") else "unknown"
