"""A driver process killed with the Ray it started, and its local journal read back
(the crash-and-resume tests of the API, the CLI, sweeps and Ray Train)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from .processes import kill_tree, ray_started_by


def kill_with_its_ray(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the driver and every process it started (its Ray: GCS, raylet, workers)."""
    descendants = kill_tree(proc.pid)
    proc.wait()
    assert ray_started_by(descendants), "the driver started no Ray"


def head_trials(path: Path) -> list[dict[str, Any]]:
    """Every trial's entry in the local head at ``path``, in the trials' order, the
    sealed ones too (format 3: from the sealed objects it lists)."""
    entries = read_journal(path)
    if entries is None:
        raise AssertionError(f"no readable journal at {path}")
    return list(entries.values())


def read_journal(path: Path) -> dict[str, Any] | None:
    """Every trial's entry in the local head at ``path``, the sealed ones too (format 3:
    from the sealed objects it lists)."""
    try:
        head = json.loads(path.read_text())
        entries = {}
        for item in head.get("sealed") or []:
            for line in (path.parent / item["key"]).read_bytes().splitlines():
                entry = json.loads(line)["entry"]
                entries[entry["id"]] = entry
        entries.update((t["id"], t) for t in head["trials"])
        return dict(sorted(entries.items(), key=lambda item: item[1].get("at", 0)))
    except (OSError, ValueError, KeyError):
        return None  # not written yet (or being replaced: retry)
