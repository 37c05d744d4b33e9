"""The actor's clean-up of scratch space that killed predecessors left behind."""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.trainable import _remove_dead_scratch


def test_dead_generations_scratch_is_removed_live_and_other_trials_kept(tmp_path: Path) -> None:
    dead_pid = 2**22 + 12345  # above the default pid_max: no such process
    dead = tmp_path / f"trial-g1-{dead_pid}"
    alive = tmp_path / f"trial-g2-{os.getpid()}"
    other_trial = tmp_path / f"other-g1-{dead_pid}"
    for path in (dead, alive, other_trial):
        (path / "checkpoint_000001").mkdir(parents=True)
    _remove_dead_scratch(str(tmp_path / "trial-g3-1"))
    assert not dead.exists()
    assert alive.exists() and other_trial.exists()
