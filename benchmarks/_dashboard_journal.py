"""A synthetic experiment journal of any size, in the journal's format 2, for the
dashboard's benchmark: a sweep (metric ``loss``, mode ``min``) of trials with four
config keys and results that look like training (loss falling, accuracy rising, the
usual bookkeeping keys), stored as one base segment plus a few tail segments, as the
writer leaves them between two compactions. :func:`append` adds results the way the
writer does: a new segment first, then the head that lists it, replaced atomically.
"""

from __future__ import annotations

import json
import math
import os
import random
import secrets
import time
from pathlib import Path
from typing import Any

from orchestrator.core.journal_format import FORMAT_VERSION, JOURNAL_KEY, SEGMENTS_PREFIX

OPTIMIZERS = ("sgd", "adam", "adamw")


class SyntheticExperiment:
    """An experiment directory and what its journal holds (see the module docstring)."""

    def __init__(self, path: Path, trials: int, seed: int = 0) -> None:
        self.path = path
        self.rng = random.Random(seed)
        self.started = time.time() - 3600
        self.ids = [f"trial_{i:05d}" for i in range(trials)]
        self.configs = {
            t: {
                "lr": 10 ** self.rng.uniform(-5, -1),
                "batch_size": self.rng.choice([16, 32, 64, 128]),
                "momentum": round(self.rng.uniform(0.8, 0.99), 3),
                "optimizer": self.rng.choice(OPTIMIZERS),
            }
            for t in self.ids
        }
        self.counts = dict.fromkeys(self.ids, 0)
        self.segments: list[str] = []
        self._token = secrets.token_hex(4)

    def row(self, trial: str, iteration: int) -> dict[str, Any]:
        config = self.configs[trial]
        quality = -abs(math.log10(config["lr"]) + 3) + self.rng.gauss(0, 0.05)
        loss = 2.0 * math.exp(-iteration / 40) + 0.3 - 0.05 * quality + self.rng.gauss(0, 0.02)
        return {
            "loss": loss,
            "accuracy": 1 - loss / 2.5,
            "training_iteration": iteration,
            "time_this_iter_s": 0.05,
            "time_total_s": 0.05 * iteration,
            "timestamp": self.started + iteration * 0.05,
            "trial_id": trial,
        }

    def append(self, rows_per_trial: int, trials: list[str] | None = None) -> None:
        """``rows_per_trial`` more results for ``trials`` (default: all), as one new
        segment and a new head."""
        lines = []
        for trial in trials or self.ids:
            first = self.counts[trial]
            rows = [self.row(trial, first + k + 1) for k in range(rows_per_trial)]
            self.counts[trial] = first + rows_per_trial
            lines.append(json.dumps({"trial": trial, "from": first, "rows": rows}))
        key = f"{SEGMENTS_PREFIX}/{self._token}-{len(self.segments):06d}.jsonl"
        _write(self.path / key, ("\n".join(lines) + "\n").encode())
        self.segments.append(key)
        self.write_head()

    def write_head(self, state: str = "RUNNING") -> None:
        entries = []
        for trial in self.ids:
            count = self.counts[trial]
            entries.append(
                {
                    "trainable": "bench:Model",
                    "config": self.configs[trial],
                    "checkpoint_every": 10,
                    "resources": {"cpu": 1.0},
                    "max_failures": 0,
                    "id": trial,
                    "state": state,
                    "iteration": count,
                    "num_failures": 0,
                    "error": None,
                    "checkpoints": [],
                    "last_result": self.row(trial, count) if count else None,
                    "results_count": count,
                }
            )
        head = {
            "format": FORMAT_VERSION,
            "name": self.path.name,
            "started_at": self.started,
            "written_at": time.time(),
            "segments": self.segments,
            "sweeps": [{"name": "sweep", "metric": "loss", "mode": "min", "trials": self.ids}],
            "trials": entries,
        }
        _write(self.path / JOURNAL_KEY, json.dumps(head).encode())


def build(path: Path, trials: int, results: int, tail_segments: int = 3) -> SyntheticExperiment:
    """An experiment of ``trials`` x ``results``: a base with most results, then
    ``tail_segments`` smaller segments (the writer's shape between compactions)."""
    experiment = SyntheticExperiment(path, trials)
    tail = max(1, results // 20)
    base = results - tail * tail_segments
    experiment.append(base)
    for _ in range(tail_segments):
        experiment.append(tail)
    return experiment


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_bytes(data)
    os.replace(staged, path)
