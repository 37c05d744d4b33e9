"""Node-local scratch space of trial actors: where saves, restores and streamed
checkpoints are staged, and the cleanup of what dead actors left there."""

from __future__ import annotations

import os
import shutil
import tempfile
import time

#: Seconds another trial's dead actor's scratch must have been left untouched before a
#: trial actor removes it (see :func:`remove_dead_scratch`).
FOREIGN_SCRATCH_GRACE_S = 600.0


def remove_dead_scratch(own: str) -> None:
    """Drop the scratch directories that killed trial actors left on this host.

    A SIGKILLed actor cannot clean up after itself. Its directory, named
    ``<trial>-g<generation>-<pid>``, is removed once its process is gone: whatever it
    holds belongs to a generation the driver has given up (a pending upload from it
    would be garbage-collected, never listed). For this trial's own dead actors that is
    certain: a new generation exists. Another trial's actor may have died a moment ago,
    its death not yet seen by the driver, while its node's persister still uploads a
    save from that directory; so another trial's directory goes only once it has been
    left untouched for :data:`FOREIGN_SCRATCH_GRACE_S` (the actor of a trial that ended
    in ERROR, which nobody releases, say). Directories are grouped by host name, so a
    temporary directory shared between machines never has one host judge another's
    processes dead.
    """
    parent, name = os.path.split(own)
    trial_part = name.rsplit("-g", 1)[0]
    try:
        entries = os.listdir(parent)
    except FileNotFoundError:
        return
    stale_before = time.time() - FOREIGN_SCRATCH_GRACE_S
    for entry in entries:
        if entry == name:
            continue
        path = os.path.join(parent, entry)
        try:
            pid = int(entry.rsplit("-", 1)[1])
            if entry.rsplit("-g", 1)[0] != trial_part and os.stat(path).st_mtime > stale_before:
                continue
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except (ValueError, IndexError, OSError):
            continue


def fetch_dir(trial_id: str, generation: int) -> str:
    """Where the driver streams a checkpoint from another node's disk for ``trial_id``'s
    actor of ``generation`` to load (the actor removes it once loaded)."""
    return os.path.join(tempfile.gettempdir(), "trialflow-fetch", f"{trial_id}-g{generation}")


def remove_stale_fetches(trial_id: str, generation: int) -> None:
    """Drop what was streamed for this trial's earlier actors and never loaded: one that
    died, or was given up, before its restore ran. A new generation's stream starts
    only after its actor's setup, so none of these is in use."""
    parent = os.path.dirname(fetch_dir(trial_id, generation))
    try:
        entries = os.listdir(parent)
    except FileNotFoundError:
        return
    for entry in entries:
        owner, _, gen = entry.rpartition("-g")
        if owner == trial_id and gen.isdigit() and int(gen) < generation:
            shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)


def fresh_dir(path: str) -> str:
    """An empty directory at ``path`` (a leftover from a failed attempt is removed)."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path
