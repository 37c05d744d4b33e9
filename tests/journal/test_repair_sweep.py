"""``repair`` also sweeps, under the lease, the checkpoint blobs a crash left that no
checkpoint holds (and a stale staging directory holding links), and says so; blobs a
checkpoint holds stay."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from orchestrator.api.repair import repair
from storage.blobs_local import STALE_AFTER_S
from storage.dedup import blob_key

from ..support.blob_trainables import blob_names, checkpoint_dirs, held_shas, verify_checkpoint
from ..support.finished_experiment import NAME


async def test_repair_sweeps_the_blobs_no_checkpoint_holds(finished: Path, tmp_path: Path) -> None:
    shutil.copytree(finished / "runs", tmp_path / "runs")  # copies links as files
    experiment = tmp_path / "runs" / NAME
    assert blob_names(experiment) == held_shas(experiment)
    trial_dir = next(p for p in experiment.iterdir() if checkpoint_dirs(p))
    checkpoint = checkpoint_dirs(trial_dir)[-1]
    shutil.rmtree(experiment / ".blobs")
    held = experiment / blob_key(_sha(checkpoint / "state.json"))
    held.parent.mkdir(parents=True)
    os.link(checkpoint / "state.json", held)  # held by a checkpoint, as a save leaves it
    orphan = experiment / blob_key("d" * 64)
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(b"left by a driver killed mid-delete")
    stage = trial_dir / ".trialflow-tmp-checkpoint_000099-0123456789ab"
    stage.mkdir()
    os.link(checkpoint / "state.json", stage / "state.json")
    old = os.stat(stage).st_mtime - STALE_AFTER_S - 60
    os.utime(stage, (old, old))

    report = await repair(tmp_path / "runs", NAME)
    assert report.action == "intact" and report.blobs_swept == 1
    assert any("deleted 1 blob(s) that no checkpoint names" in line for line in report.lines())
    assert not orphan.exists() and not stage.exists()
    assert held.exists()
    verify_checkpoint(checkpoint)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
