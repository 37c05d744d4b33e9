"""A checkpoint that cannot be stored for good (a full disk, a FIFO in it, a link out of
it) pauses its trial at once with an error naming the trial, the file and the way on;
what was stored stays; other trials go on; a resume after the fix continues the trial.

The full disk is a real, small tmpfs (``tests/support/fullfs.py``), filled by the trial itself
at a known step, so the next checkpoint meets the kernel's ``ENOSPC``. On the fake Ray
(moved from ``tests/test_unstorable_checkpoints.py``: only the Ray under them changed).
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from orchestrator import TrialState

from ..support.fake_engine import MakeOrchestrator
from ..support.fullfs import fill, small_filesystem
from ..support.trainables import Counter, assert_failure_free_history

CPU = {"cpu": 0.25}
QUIET: dict[str, Any] = {"progress": False, "loggers": []}


class FillsTheDisk(Counter):
    """Checkpoints of ``payload`` bytes; at step ``fill_at`` it fills the disk at
    ``disk`` (once: ``filled`` marks it), leaving too little for the next checkpoint."""

    def step(self) -> dict[str, Any]:
        result = super().step()
        if self.count == self.config["fill_at"] and not os.path.exists(self.config["filled"]):
            fill(Path(self.config["disk"]), leave=64 * 1024)
            open(self.config["filled"], "w").close()
        return result

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        super().save_checkpoint(checkpoint_dir)
        with open(os.path.join(checkpoint_dir, "payload"), "wb") as fh:
            fh.write(os.urandom(self.config["payload"]))


class OddCheckpoint(Counter):
    """From its second checkpoint on, also leaves ``odd`` in it: a FIFO, or a link to
    ``/etc/passwd``."""

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        super().save_checkpoint(checkpoint_dir)
        if self.count > self.config["checkpoint_every"]:
            if self.config["odd"] == "fifo":
                os.mkfifo(os.path.join(checkpoint_dir, "pipe"))
            else:
                os.symlink("/etc/passwd", os.path.join(checkpoint_dir, "passwd"))


def _stored(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


async def test_a_full_disk_pauses_the_trial_at_once_and_a_resume_continues_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, orchestrator: MakeOrchestrator
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator")
    with small_filesystem(tmp_path / "disk", 8 << 20) as disk:
        config = {
            "disk": str(disk),
            "filled": str(tmp_path / "filled"),
            "fill_at": 4,
            "payload": 300_000,
        }
        async with orchestrator(storage=disk, name="full", **QUIET) as orch:
            trial = orch.add_trial(
                FillsTheDisk,
                config,
                stop={"training_iteration": 12},
                checkpoint_every=3,
                resources=CPU,
            )
            # The default save_retry_for is 300 s: a pause within this wait is at once.
            await asyncio.wait_for(orch.run(), 120)
        assert trial.state is TrialState.PAUSED
        error = str(trial.error)
        assert error.startswith(f"trial {trial.id}: its checkpoint at iteration 6 cannot be")
        assert "retrying cannot help" in error and "StorageFull" in error
        assert "no space left on the device" in error and "free space" in error
        assert f"{disk}/full/{trial.id}/checkpoint_000006" in error
        assert "`await trial.resume()`" in error and "resume=True" in error
        assert error.count(trial.id) == 2  # the prefix and the checkpoint's path, once each
        assert [c.iteration for c in trial.checkpoints] == [3]
        # No staging left behind (the lease's lock file is meant to stay).
        staged = [p for p in disk.rglob("*") if p.name.startswith(".trialflow-tmp-")]
        assert not [p for p in staged if not p.name.startswith(".trialflow-tmp-lock-")]

        (disk / "filler").unlink()
        caplog.clear()
        async with orchestrator(storage=disk, name="full", resume=True, **QUIET) as orch:
            (again,) = orch.trials
            await asyncio.wait_for(orch.run(), 120)
        said = f"trial {trial.id} was paused because a checkpoint could not be stored; resuming"
        assert said in caplog.text
        assert again.state is TrialState.TERMINATED
        assert_failure_free_history(again, 12)


@pytest.mark.parametrize("odd", ["fifo", "link out"])
async def test_a_file_storage_cannot_keep_pauses_the_trial_at_once(
    tmp_path: Path, odd: str, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="odd", **QUIET) as orch:
        trial = orch.add_trial(
            OddCheckpoint,
            {"odd": odd, "checkpoint_every": 2},
            stop={"training_iteration": 8},
            checkpoint_every=2,
            resources=CPU,
        )
        healthy = orch.add_trial(
            Counter, stop={"training_iteration": 8}, checkpoint_every=2, resources=CPU
        )
        await asyncio.wait_for(orch.run(), 120)
    assert healthy.state is TrialState.TERMINATED
    assert trial.state is TrialState.PAUSED
    assert [c.iteration for c in trial.checkpoints] == [2]
    error = str(trial.error)
    assert error.startswith(f"trial {trial.id}: its checkpoint at iteration 4 cannot be stored")
    assert "UnsupportedFile" in error and "retrying cannot help" in error
    if odd == "fifo":
        assert "'pipe' is a FIFO (named pipe): only regular files" in error
    else:
        assert "'passwd' is a symbolic link to '/etc/passwd', outside the directory" in error
        secret = Path("/etc/passwd").read_bytes()
        assert not [p for p in _stored(tmp_path / "odd") if p.read_bytes() == secret]
