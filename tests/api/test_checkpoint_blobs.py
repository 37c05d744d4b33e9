"""Content-addressed checkpoints through the whole stack, on real Ray: a trial's
unchanged files are one blob; an experiment saved before blobs (full copies) resumes,
restores and is garbage-collected; a trainable writing into its restored directory
changes no checkpoint; a resumed run sweeps the blobs a crash left."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, Trial, TrialState
from storage.blobs_local import STALE_AFTER_S
from storage.dedup import blob_key

from ..support.blob_trainables import (
    FrozenPart,
    blob_names,
    checkpoint_dirs,
    held_shas,
    to_full_copies,
    verify_checkpoint,
)
from ..support.trainables import assert_failure_free_history

NAME = "blobs"
OPTIONS: dict[str, Any] = {
    "stop": {"training_iteration": 8},
    "checkpoint_every": 1,
    "keep_checkpoints": 2,
    "resources": {"cpu": 0.25},
}


async def run_and_pause(storage: Path, config: dict[str, Any], **kw: Any) -> Trial:
    """A first run whose trial is paused after 3 iterations (3 checkpoints saved)."""
    async with Orchestrator(storage=storage, name=NAME, progress=False, **kw) as orch:
        trial = orch.add_trial(FrozenPart, {**config, "delay": 0.05}, **OPTIONS)
        running = asyncio.create_task(orch.run())
        while trial.iteration < 3:
            await asyncio.sleep(0.05)
        await trial.pause()
        await running
    assert trial.state is TrialState.PAUSED
    return trial


async def resume(storage: Path, config: dict[str, Any], **kw: Any) -> Trial:
    async with Orchestrator(storage=storage, name=NAME, resume=True, progress=False, **kw) as orch:
        trial = orch.add_trial(FrozenPart, {**config, "delay": 0.05}, **OPTIONS)
        await orch.run()
        await trial.resume()
        await trial.wait()
    assert trial.state is TrialState.TERMINATED, trial.error
    assert_failure_free_history(trial, 8)
    return trial


def assert_stored_once(experiment: Path, trial: Trial) -> None:
    """The kept checkpoints verify, share the frozen part's inode, and ``.blobs`` holds
    exactly their contents."""
    kept = checkpoint_dirs(experiment / trial.id)
    assert [p.name for p in kept] == ["checkpoint_000007", "checkpoint_000008"]
    for path in kept:
        verify_checkpoint(path)
    assert len({(p / "frozen.bin").stat().st_ino for p in kept}) == 1
    assert (kept[0] / "frozen.bin").stat().st_nlink == 3  # the blob and two checkpoints
    assert blob_names(experiment) == held_shas(experiment)


@pytest.mark.usefixtures("ray_local")
async def test_an_experiment_of_full_copies_resumes_and_is_collected(tmp_path: Path) -> None:
    paused = await run_and_pause(tmp_path, {})
    experiment = tmp_path / NAME
    to_full_copies(experiment)  # as an earlier version left it
    old = checkpoint_dirs(experiment / paused.id)
    assert old and not (experiment / ".blobs").exists()
    assert all((p / "frozen.bin").stat().st_nlink == 1 for p in old)

    trial = await resume(tmp_path, {})  # restores a full copy: verified, loaded
    assert trial.id == paused.id
    assert not any(p.exists() for p in old)  # the old ones collected like any
    assert_stored_once(experiment, trial)


@pytest.mark.usefixtures("ray_local")
async def test_a_trainable_writing_into_its_restored_checkpoint_changes_no_checkpoint(
    tmp_path: Path,
) -> None:
    """The restore hands the trainable copies: its rewrite of ``frozen.bin`` reaches
    neither the checkpoint it came from nor the blob later checkpoints link to (each
    load checks the frozen part, each checkpoint is verified)."""
    await run_and_pause(tmp_path, {"scribble": True})
    trial = await resume(tmp_path, {"scribble": True})
    assert_stored_once(tmp_path / NAME, trial)


async def test_a_resumed_run_sweeps_what_a_crash_left(tmp_path: Path, fake_ray: Any) -> None:
    """Blobs no checkpoint holds and a stale staging directory (a driver killed
    mid-delete or mid-save) go at the next run's start; what checkpoints hold stays."""
    paused = await run_and_pause(tmp_path, {}, _ray_backend=fake_ray)
    experiment = tmp_path / NAME
    orphan = experiment / blob_key("e" * 64)
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(b"left by a crash")
    stage = experiment / paused.id / ".trialflow-tmp-checkpoint_000009-0123456789ab"
    stage.mkdir()
    newest = checkpoint_dirs(experiment / paused.id)[-1]
    os.link(newest / "state.json", stage / "state.json")
    old = os.stat(stage).st_mtime - STALE_AFTER_S - 60
    os.utime(stage, (old, old))
    trial = await resume(tmp_path, {}, _ray_backend=fake_ray)
    assert not orphan.exists() and not stage.exists()
    assert_stored_once(experiment, trial)
