"""The actor's clean-up of scratch space that killed actors left behind."""

from __future__ import annotations

import os
import socket
import tempfile
import time
from pathlib import Path

import pytest

from orchestrator.actor.scratch import (
    FOREIGN_SCRATCH_GRACE_S,
    fetch_dir,
    remove_dead_scratch,
    remove_stale_fetches,
)
from orchestrator.actor.trial_actor import TrialActor, _HostedTrial

from ..support.trainables import Counter

DEAD_PID = 2**22 + 12345  # above the default pid_max: no such process


def _make(*paths: Path) -> None:
    for path in paths:
        (path / "checkpoint_000001").mkdir(parents=True)


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_dead_actors_scratch_is_removed_and_live_ones_kept(tmp_path: Path) -> None:
    """This trial's dead generations go at once; another trial's dead actor only once
    its directory has been left alone for the grace period (its death may not have
    reached the driver yet, and a persister may still read a save there)."""
    dead = tmp_path / f"trial-g1-{DEAD_PID}"
    other_just_died = tmp_path / f"other-g1-{DEAD_PID}"
    other_long_dead = tmp_path / f"errored-g1-{DEAD_PID}"
    alive = tmp_path / f"trial-g2-{os.getpid()}"
    other_alive = tmp_path / f"third-g2-{os.getppid()}"
    not_ours = tmp_path / "somebody-elses-dir"
    _make(dead, other_just_died, other_long_dead, alive, other_alive, not_ours)
    _age(other_long_dead, FOREIGN_SCRATCH_GRACE_S + 60)
    _age(other_alive, FOREIGN_SCRATCH_GRACE_S + 60)
    remove_dead_scratch(str(tmp_path / "trial-g3-1"))
    assert not dead.exists() and not other_long_dead.exists()
    assert other_just_died.exists()
    assert alive.exists() and other_alive.exists() and not_ours.exists()


def test_a_released_trial_sweeps_dead_actors_scratch(tmp_path: Path) -> None:
    """A predecessor killed just before setup looked may still have been a zombie then,
    and an actor whose trial went to ERROR is never released: the next release on the
    host sweeps them (live ones stay)."""
    hosted = _HostedTrial(Counter, "trial", 3, None, str(tmp_path))
    assert hosted.scratch == str(tmp_path / f"trial-g3-{os.getpid()}")
    dead = tmp_path / f"trial-g2-{DEAD_PID}"
    errored_trial = tmp_path / f"other-g1-{DEAD_PID}"
    alive = tmp_path / f"third-g1-{os.getppid()}"
    _make(Path(hosted.scratch), dead, errored_trial, alive)
    _age(errored_trial, FOREIGN_SCRATCH_GRACE_S + 60)
    hosted.release()
    assert not Path(hosted.scratch).exists()
    assert not dead.exists() and not errored_trial.exists()
    assert alive.exists()


def test_scratch_is_grouped_by_host(tmp_path: Path) -> None:
    """Another machine sharing the temporary directory sweeps only its own host's
    directory, never judging this host's processes by its own pid table."""
    parent = Path(TrialActor(str(tmp_path))._scratch_parent())
    assert parent == Path(tempfile.gettempdir()) / "trialflow" / socket.gethostname()


def test_setup_drops_what_was_streamed_for_its_trials_earlier_actors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint streamed from another node for an actor that died before loading it
    stays behind; the trial's next actor removes it (never the current generation's,
    nor another trial's)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    old = [Path(fetch_dir("trial", g)) for g in (1, 2)]
    current, other = Path(fetch_dir("trial", 3)), Path(fetch_dir("trial-2", 1))
    _make(*old, current, other)
    remove_stale_fetches("trial", 3)
    assert not any(p.exists() for p in old)
    assert current.exists() and other.exists()
