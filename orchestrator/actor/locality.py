"""Where a checkpoint in local storage really is: found by looking, not by node id.

With local storage (a path, maybe NFS) a committed checkpoint is a directory at a known
path. Which processes can see it depends on the disks, not on Ray: every node of one
machine sees it, every machine sharing an NFS volume sees it, and a node id says
nothing about it (ids change with each Ray start, and a dead node's disk, or the NFS
volume it wrote to, is often still there). So a restore asks its own actor first
whether the checkpoint is visible at its path, then other live nodes (the saver's
host first), and streams it only from one that sees it; garbage collection deletes it
where it is visible. This module holds the check itself, run in whichever process
looks; it imports no Ray.

"Visible" means committed and complete: the manifest is there, lists the files the
checkpoint was recorded with, and every file has its recorded size. Hashes are checked
later, when the checkpoint is loaded (``get_checkpoint`` verifies every byte).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from storage.manifest import MANIFEST_NAME

#: Fault injection for tests: a process whose environment names a directory here sees no
#: checkpoint below it. Nodes of one ``ray.cluster_utils`` cluster share a disk; this
#: is how a test makes a checkpoint visible from some nodes only.
HIDDEN_ROOT_ENV = "TRIALFLOW_TEST_HIDDEN_ROOT"


def is_visible(path: str, manifest: Mapping[str, Any] | None) -> bool:
    """Whether the checkpoint recorded with ``manifest`` is committed, complete, at
    ``path`` as this process sees it. Never raises: an unreadable one is not visible."""
    hidden = os.environ.get(HIDDEN_ROOT_ENV)
    if hidden and os.path.abspath(path).startswith(os.path.abspath(hidden) + os.sep):
        return False
    try:
        with open(os.path.join(path, MANIFEST_NAME), "rb") as f:
            found = json.loads(f.read())
        files = found["files"]
        if manifest is not None and _entries(files) != _entries(manifest.get("files", [])):
            return False  # another checkpoint under the same key (an older run's)
        for entry in files:
            if os.path.getsize(os.path.join(path, *str(entry["path"]).split("/"))) != int(
                entry["size"]
            ):
                return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True


def _entries(files: Any) -> set[tuple[str, int, str]]:
    return {(str(f["path"]), int(f["size"]), str(f.get("sha256", ""))) for f in files}


def delete_if_visible(root: str, key: str, manifest: Mapping[str, Any] | None) -> bool:
    """Delete checkpoint ``key`` of the local storage at ``root`` if this process sees
    it (manifest first, as ``delete_checkpoint`` does); whether it did."""
    import asyncio

    from storage import LocalStorage

    path = os.path.join(root, *key.split("/"))
    if not is_visible(path, manifest):
        return False

    async def run() -> None:
        async with LocalStorage(root) as store:
            await store.delete_checkpoint(key)

    asyncio.run(run())
    return True
