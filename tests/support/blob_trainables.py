"""Trainables for the content-addressed checkpoint tests (importable by Ray workers), and
what those tests look at on disk."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from storage import MANIFEST_NAME

from .trainables import Counter

#: The part of the model that never changes: the same bytes in every checkpoint.
FROZEN = hashlib.sha256(b"frozen").digest() * (3 << 10)  # 96 KiB


class FrozenPart(Counter):
    """A Counter whose checkpoint also holds ``frozen.bin`` (:data:`FROZEN`, never
    changing). With ``scribble`` in its config, a restore rewrites the restored
    ``frozen.bin`` in place after reading it, as careless user code may."""

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        super().save_checkpoint(checkpoint_dir)
        with open(os.path.join(checkpoint_dir, "frozen.bin"), "wb") as fh:
            fh.write(FROZEN)

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        super().load_checkpoint(checkpoint_dir)
        path = os.path.join(checkpoint_dir, "frozen.bin")
        with open(path, "rb") as fh:
            if fh.read() != FROZEN:
                raise RuntimeError(f"{path} does not hold the frozen part")
        if self.config.get("scribble"):
            with open(path, "r+b") as fh:
                fh.write(b"\0" * 4096)


def checkpoint_dirs(trial_dir: Path) -> list[Path]:
    """The committed checkpoints in a trial's directory, oldest first."""
    return sorted(p.parent for p in trial_dir.glob(f"checkpoint_*/{MANIFEST_NAME}"))


def verify_checkpoint(path: Path) -> None:
    """Every file of the checkpoint at ``path`` has its manifest's size and SHA-256."""
    for entry in json.loads((path / MANIFEST_NAME).read_bytes())["files"]:
        data = (path / entry["path"]).read_bytes()
        got = (len(data), hashlib.sha256(data).hexdigest())
        assert got == (entry["size"], entry["sha256"]), (path, entry["path"])


def blob_names(experiment: Path) -> set[str]:
    top = experiment / ".blobs"
    return {p.name for p in top.rglob("*") if p.is_file()} if top.exists() else set()


def held_shas(experiment: Path) -> set[str]:
    """The SHA-256 of every file of every committed checkpoint of the experiment."""
    return {
        entry["sha256"]
        for manifest in experiment.glob(f"*/checkpoint_*/{MANIFEST_NAME}")
        for entry in json.loads(manifest.read_bytes())["files"]
    }


def to_full_copies(experiment: Path) -> None:
    """Turn an experiment into what earlier versions wrote: each checkpoint file a copy
    of its own, no ``.blobs`` (the manifests were the same then)."""
    shutil.rmtree(experiment / ".blobs", ignore_errors=True)
    for path in experiment.rglob("*"):
        if path.is_file() and path.stat().st_nlink > 1:
            copy = path.with_name(path.name + ".copy")
            shutil.copyfile(path, copy)
            os.replace(copy, path)
