"""Journals to read: a tiny run on the fake Ray, heads and segments written by hand, and
a module that records being imported (the reader's and the ``inspect`` commands' tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator import Orchestrator, Trial
from orchestrator.core.journal_format import JOURNAL_KEY

from .fakeray import FakeRay
from .trainables import Counter, Recorder

#: A module that records being imported: the reader must never import it.
MARKER_MODULE = "trialflow_reader_marker"


MARKER_SOURCE = """
import pathlib
pathlib.Path(__file__).with_suffix(".imported").touch()

class Boom:
    pass
"""


async def run_tiny_experiment(root: Path, name: str) -> list[Trial]:
    """A run on the fake Ray: ``steady`` (3 checkpoints), ``recovers`` (one failure
    after a checkpoint, so results past it are rolled back), ``fails`` (ERROR)."""
    marks = root / f"{name}-marks"
    marks.mkdir(parents=True)
    fake = FakeRay(root / f"{name}-nodes")
    async with Orchestrator(
        storage=root, name=name, journal_interval=0.05, _ray_backend=fake
    ) as orch:
        stop = {"training_iteration": 6}
        trials = [
            orch.add_trial(Counter, {"delay": 0.02}, stop, 2, CPU, trial_id="steady"),
            orch.add_trial(
                Recorder,
                {"marks": str(marks), "fail_once_at": 5, "delay": 0.05},
                stop,
                3,
                CPU,
                trial_id="recovers",
                max_failures=1,
            ),
            orch.add_trial(Counter, {"fail_at": 2}, stop, 0, CPU, trial_id="fails"),
        ]
        await orch.run()
    fake.close()
    return trials


def write_head(root: Path, head: dict[str, Any], segments: dict[str, str] | None = None) -> Path:
    """An experiment directory holding ``head`` and the given segment objects."""
    root.mkdir(parents=True, exist_ok=True)
    (root / JOURNAL_KEY).write_text(json.dumps(head))
    for key, text in (segments or {}).items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_text(text)
    return root


def entry(trial_id: str, **fields: Any) -> dict[str, Any]:
    """A trial's head entry as journal.py writes it (format 2)."""
    return {
        "trainable": "tests.support.trainables:Counter",
        "trainable_pickle": None,
        "config": {"lr": 0.1},
        "config_pickle": "",
        "stop_pickle": "",
        "checkpoint_every": 0,
        "resources": {"cpu": 1.0},
        "max_failures": 0,
        "keep_checkpoints": None,
        "checkpoint_score": None,
        "result_buffer": 1,
        "id": trial_id,
        "state": "TERMINATED",
        "iteration": 0,
        "num_failures": 0,
        "error": None,
        "checkpoints": [],
        "last_result": None,
        "results_count": 0,
        **fields,
    }


def segment(*lines: dict[str, Any]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


def rows(*values: float) -> list[dict[str, Any]]:
    return [{"loss": v, "training_iteration": i} for i, v in enumerate(values, start=1)]


CPU = {"cpu": 0.25}
