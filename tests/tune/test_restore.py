"""Resume the Tune way: a driver running ``Tuner.fit()`` is SIGKILLed mid-run, and
``Tuner.restore(path, trainable).fit()`` in another process continues the run: finished
trials are kept, the others go on from their newest checkpoints, and no sample is added.
With a function trainable and a class trainable."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator import tune
from orchestrator.core.journal_format import JOURNAL_KEY

from ..support.journal_files import head_trials
from .crash_trainables import SlowCounter, slow_counter

pytestmark = pytest.mark.usefixtures("ray_local")

ROOT = Path(__file__).resolve().parents[2]

DRIVER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    import ray
    ray.init(address={address!r}, logging_level="ERROR")
    from orchestrator import tune
    from tests.tune.crash_trainables import SlowCounter, slow_counter
    trainable = {{"function": slow_counter, "class": SlowCounter}}[{kind!r}]
    every = tune.CheckpointConfig(checkpoint_frequency=1 if {kind!r} == "class" else 0)
    tune.Tuner(
        tune.with_resources(trainable, {{"cpu": 0.25}}),
        param_space={{"x": tune.grid_search([1, 2, 3]), "marks": {marks!r}, "steps": 8}},
        tune_config=tune.TuneConfig(max_concurrent_trials=3),
        run_config=tune.RunConfig(storage_path={storage!r}, name="crash", verbose=0,
                                  checkpoint_config=every),
    ).fit()
    """
)


def checkpointed(journal: Path) -> int:
    """How many trials the journal shows with a persisted checkpoint."""
    try:
        trials = head_trials(journal.parent)
    except (OSError, ValueError, KeyError):
        return 0
    return sum(1 for t in trials if t.get("checkpoints"))


@pytest.mark.parametrize("kind", ["function", "class"])
async def test_restore_continues_a_run_whose_driver_was_killed(
    kind: str, tmp_path: Path, ray_cluster: Any
) -> None:
    marks, storage = tmp_path / "marks", tmp_path / "runs"
    marks.mkdir()
    script = DRIVER.format(
        root=str(ROOT),
        address=ray_cluster.address,
        kind=kind,
        marks=str(marks),
        storage=str(storage),
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=str(ROOT))
    path = storage / "crash"
    try:
        deadline = time.monotonic() + 150
        while checkpointed(path / JOURNAL_KEY) < 3:
            assert proc.poll() is None, "the driver ended before it was killed"
            assert time.monotonic() < deadline, "the trials never checkpointed"
            await asyncio.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    (marks / "fast").touch()
    assert tune.Tuner.can_restore(str(path))

    trainable = slow_counter if kind == "function" else SlowCounter
    tuner = tune.Tuner.restore(str(path), tune.with_resources(trainable, {"cpu": 0.25}))
    results = await asyncio.to_thread(tuner.fit)

    assert len(results) == 3 and results.num_errors == 0
    assert sorted(r.config["x"] for r in results) == [1, 2, 3]
    assert all(r.metrics["step"] == 8 for r in results)
    starts: dict[str, list[int]] = {}
    for line in (marks / "starts").read_text().splitlines():
        trial, _, start = line.partition(" start:")
        starts.setdefault(trial, []).append(int(start))
    assert set(starts) == {r.path.rsplit("/", 1)[1] for r in results}
    assert all(runs[0] == 0 and len(runs) == 2 and runs[1] > 0 for runs in starts.values()), starts
