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


def read_journal(path: Path) -> dict[str, Any] | None:
    try:
        return {t["id"]: t for t in json.loads(path.read_text())["trials"]}
    except (OSError, ValueError, KeyError):
        return None  # not written yet (or being replaced: retry)
