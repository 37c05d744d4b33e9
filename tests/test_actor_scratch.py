"""The actor's clean-up of scratch space that killed predecessors left behind."""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.trainable import _HostedTrial, _remove_dead_scratch

from .trainables import Counter

DEAD_PID = 2**22 + 12345  # above the default pid_max: no such process


def test_dead_generations_scratch_is_removed_live_and_other_trials_kept(tmp_path: Path) -> None:
    dead_pid = DEAD_PID
    dead = tmp_path / f"trial-g1-{dead_pid}"
    alive = tmp_path / f"trial-g2-{os.getpid()}"
    other_trial = tmp_path / f"other-g1-{dead_pid}"
    for path in (dead, alive, other_trial):
        (path / "checkpoint_000001").mkdir(parents=True)
    _remove_dead_scratch(str(tmp_path / "trial-g3-1"))
    assert not dead.exists()
    assert alive.exists() and other_trial.exists()


def test_a_released_trial_sweeps_its_dead_predecessors_scratch(tmp_path: Path) -> None:
    """A predecessor killed just before setup looked may still have been a zombie then;
    the trial's own release sweeps again (its own and other trials' live ones stay)."""
    hosted = _HostedTrial(Counter, "trial", 3, None)
    hosted.scratch = str(tmp_path / f"trial-g3-{os.getpid()}")
    dead = tmp_path / f"trial-g2-{DEAD_PID}"
    other_trial = tmp_path / f"other-g1-{DEAD_PID}"
    for path in (Path(hosted.scratch), dead, other_trial):
        (path / "checkpoint_000001").mkdir(parents=True)
    hosted.release()
    assert not Path(hosted.scratch).exists() and not dead.exists()
    assert other_trial.exists()
