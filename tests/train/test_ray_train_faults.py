"""Distributed trials (Ray Train, 2 workers: ``tests/support/train_gang.py``) survive their
driver's death, on real Ray: the driver is SIGKILLed mid-run, Ray ends the dead
driver's trial actors, their Train controllers and gangs (no placement group is left
holding resources), and a new driver with ``resume=True`` continues every distributed
trial from its checkpoint. (A node lost under a gang: ``tests/train/test_ray_train_sweep.py``,
which has the nodes.)

Every wait is on an event (a hold's marker files, a journaled checkpoint), never on a
sleep. Most of the time is Ray Train starting worker groups.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("ray.train.torch")

from orchestrator.core.journal_format import JOURNAL_KEY  # noqa: E402

from ..support import REPO_ROOT
from ..support.processes import end_tree, kill_tree  # noqa: E402
from ..support.train_gang import held, live_gangs, wait_gangs_released  # noqa: E402

ROOT = REPO_ROOT
#: Seconds for a whole test on a loaded 2-core machine (a Train run starts in 15-60 s).
TRAIN_TIMEOUT_S = 600
#: The distributed trials the killed driver runs. One shows what is asked (its gang
#: removed with the driver, the trial continued by the next): each trial more is a Train
#: start more on each driver, and resuming several trials is the engine's own, shown by
#: ``tests/api/test_driver_crash.py``.
TRIALS = ("a",)

GANGS = textwrap.dedent(
    """
    import asyncio, json, sys
    sys.path.insert(0, {root!r})
    from orchestrator import Orchestrator
    from tests.support.train_gang import DRIVER, gang_trial

    async def main():
        async with Orchestrator(storage={storage!r}, name="gangs", ray_address={address!r},
                                resume={resume!r}) as orch:
            if not {resume!r}:
                for name in {trials!r}:
                    orch.add_trial(gang_trial, {{"epochs": 4, "name": name,
                                                "holds": {{"*": [2, {hold!r}]}},
                                                "train_storage": {train!r}}},
                                   resources=DRIVER, trial_id=name)
            await orch.run()
        with open({report!r}, "w") as f:
            json.dump({{t.id: [t.state.value, str(t.error),
                              [[r["epoch"], r["training_iteration"], r["start"]]
                               for r in t.results]] for t in orch.trials}}, f)
    asyncio.run(main())
    """
)


@pytest.mark.slow
@pytest.mark.timeout(TRAIN_TIMEOUT_S)
async def test_distributed_trials_resume_after_their_driver_was_killed(
    tmp_path: Path, ray_local: Any
) -> None:
    """The first driver runs on the session's cluster, which outlives it: what Ray does
    with the dead driver's gangs is seen there."""
    from ..support.drivers import read_journal

    storage, report, hold = tmp_path / "store", tmp_path / "report.json", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = {
        "root": str(ROOT),
        "storage": str(storage),
        "address": ray_local.address,
        "hold": str(hold),
        "train": str(tmp_path / "train"),
        "report": str(report),
        "trials": TRIALS,
    }
    first = subprocess.Popen(
        [sys.executable, "-c", GANGS.format(resume=False, **args)], env=env, cwd=str(ROOT)
    )
    journal = storage / "gangs" / JOURNAL_KEY
    try:
        # The gangs wait after 2 epochs, their checkpoints of epoch 2 journaled.
        deadline = time.monotonic() + TRAIN_TIMEOUT_S - 200
        while time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            assert first.poll() is None, "the driver exited while its trials were held"
            trials = read_journal(journal) or {}
            saved = {
                name: max(
                    (c["iteration"] for c in trials.get(name, {}).get("checkpoints", [])), default=0
                )
                for name in TRIALS
            }
            if all(saved[n] == 2 and held(str(hold), n) == 2 for n in saved):
                break
        else:
            pytest.fail(f"the gangs never all held with a journaled checkpoint: {saved}")
        gangs = await asyncio.to_thread(live_gangs)
        assert len(gangs) == len(TRIALS), gangs  # one a trial, released below
    finally:
        kill_tree(first.pid)
        first.wait()
    # Ray ends the dead driver's actors, Train's controllers among them, and removes the
    # placement groups they made: nothing of the dead driver keeps a gang's resources.
    await asyncio.to_thread(wait_gangs_released)
    hold.touch()
    second = await asyncio.create_subprocess_exec(
        sys.executable, "-c", GANGS.format(resume=True, **args), env=env, cwd=ROOT
    )
    try:
        assert await asyncio.wait_for(second.wait(), TRAIN_TIMEOUT_S - 300) == 0
    finally:
        await end_tree(second)
    trials = json.loads(report.read_text())
    assert sorted(trials) == sorted(TRIALS)
    for name, (state, error, results) in trials.items():
        assert state == "TERMINATED", (name, error)
        # epoch, iteration, start: epochs 3 and 4 ran from the checkpoint of epoch 2
        assert results == [[1, 1, 0], [2, 2, 0], [3, 3, 2], [4, 4, 2]], (name, results)
    await asyncio.to_thread(wait_gangs_released)
