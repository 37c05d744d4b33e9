"""A finished experiment of three trials whose results span several journal segments:
the repair tests damage copies of it (``tests/journal/conftest.py`` provides the fixture)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, TrialState
from orchestrator.core.journal_format import BACKUP_KEY, JOURNAL_KEY, SEGMENTS_PREFIX
from orchestrator.core.json_codec import dumps

from .fakeray import FakeRay
from .journal_files import unseal
from .trainables import Recorder

NAME = "exp"


ITERATIONS = 12


SEGMENTS = 4


CONFIGS = [{"lr": 0.1}, {"lr": 0.01}, {"lr": 0.001}]


def add_trials(orch: Orchestrator, marks: Path) -> list[Any]:
    return [
        orch.add_trial(
            Recorder,
            {**config, "marks": str(marks)},
            stop={"training_iteration": ITERATIONS},
            checkpoint_every=4,
            resources={"cpu": 0.25},
        )
        for config in CONFIGS
    ]


@pytest.fixture(scope="module")
async def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A storage root holding ``exp`` (3 TERMINATED trials, checkpoints every 4
    iterations, the json and csv logs), its results over :data:`SEGMENTS` segments."""
    root = tmp_path_factory.mktemp("finished")
    (root / "marks").mkdir()
    fake = FakeRay(root / "nodes")
    async with Orchestrator(
        storage=root / "runs",
        name=NAME,
        progress=False,
        loggers=["json", "csv"],
        _ray_backend=fake,
    ) as orch:
        trials = add_trials(orch, root / "marks")
        await orch.run()
    fake.close()
    assert all(t.state is TrialState.TERMINATED for t in trials)
    spread_over_segments(root / "runs" / NAME)
    return root


def spread_over_segments(experiment: Path) -> None:
    """Rewrite the journal's results as :data:`SEGMENTS` segments, as successive writes
    of the writer would have left them (each segment's line for a trial starts where the
    previous one ended), and the head and its backup listing them (every trial's entry
    in the head: sealed ones put back)."""
    head = unseal(experiment)
    results: dict[str, list[Any]] = {}
    for key in head["segments"]:
        for line in (experiment / key).read_bytes().splitlines():
            part = json.loads(line)
            del results.setdefault(part["trial"], [])[part["from"] :]
            results[part["trial"]].extend(part["rows"])
        (experiment / key).unlink()
    keys = []
    for index in range(SEGMENTS):
        key = f"{SEGMENTS_PREFIX}/0000000000aa0000-{index:06d}.jsonl"
        lines = []
        for trial, rows in results.items():
            start, end = len(rows) * index // SEGMENTS, len(rows) * (index + 1) // SEGMENTS
            lines.append(dumps({"trial": trial, "from": start, "rows": rows[start:end]}) + "\n")
        (experiment / key).write_text("".join(lines))
        keys.append(key)
    head["segments"] = keys
    data = dumps(head).encode()
    (experiment / JOURNAL_KEY).write_bytes(data)
    (experiment / BACKUP_KEY).write_bytes(data)
