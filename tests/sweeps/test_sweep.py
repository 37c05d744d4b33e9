"""``Orchestrator.sweep`` on real Ray: a sweep resumes after its driver (and the Ray it
started) was killed; the new driver runs on the session's cluster (another Ray, one
start fewer). The sweep's own logic runs on the fake Ray:
``tests/engine/test_sweep_run.py``."""

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

from orchestrator.core.journal_format import JOURNAL_KEY

from ..support import REPO_ROOT
from ..support.processes import end_tree

ROOT = REPO_ROOT


DRIVER = textwrap.dedent(
    """
    import asyncio, json, sys
    sys.path.insert(0, {root!r})
    from orchestrator import Orchestrator
    from orchestrator.search import RandomSearch, uniform
    from tests.support.trainables import Objective

    async def main():
        async with Orchestrator(storage={storage!r}, name="crash", {ray},
                                resume={resume!r}) as orch:
            result = await orch.sweep(
                Objective,
                {{"x": uniform(-1, 1), "marks": {marks!r}, "delay": 0.05,
                  "gate": {gate!r}, "gate_passes": 2}},
                num_samples=6, metric="loss", mode="min", searcher=RandomSearch(seed=5),
                max_concurrent_trials=2, stop={{"training_iteration": 8}},
                checkpoint_every=4, resources={{"cpu": 0.25}})
        with open({report!r}, "w") as f:
            json.dump({{t.id: [t.state.value, t.config["x"],
                              [r["training_iteration"] for r in t.results]]
                       for t in result.trials}}, f)
    asyncio.run(main())
    """
)


async def test_a_sweep_resumes_after_its_driver_was_killed(tmp_path: Path, ray_local: Any) -> None:
    from ..support.drivers import kill_with_its_ray, read_journal

    marks, storage, report = tmp_path / "marks", tmp_path / "store", tmp_path / "report.json"
    gate = tmp_path / "gate"  # 2 trials pass, the next wait there: the sweep cannot end
    marks.mkdir()
    gate.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = {
        "root": str(ROOT),
        "storage": str(storage),
        "marks": str(marks),
        "report": str(report),
        "gate": str(gate),
    }
    first = subprocess.Popen(
        [sys.executable, "-c", DRIVER.format(resume=False, ray="num_cpus=2", **args)],
        env=env,
        cwd=str(ROOT),
    )
    journal = storage / "crash" / JOURNAL_KEY
    try:
        # The kill lands while the 2 trials let through have ended and the 2 after them
        # (max_concurrent_trials) are held at their first step: no other can start.
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            assert first.poll() is None, "the driver exited while its trials were held"
            trials = read_journal(journal) or {}
            done = [t for t in trials.values() if t["state"] == "TERMINATED"]
            if len(done) == 2 and len(list(gate.glob("*.held"))) == 2:
                break
        else:
            pytest.fail("the sweep made no progress")
    finally:
        kill_with_its_ray(first)
    (gate / "open").touch()
    before = read_journal(journal) or {}
    finished_before = {t["id"] for t in before.values() if t["state"] == "TERMINATED"}
    assert len(finished_before) == 2 and len(before) < 6  # samples left to draw
    second = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        DRIVER.format(resume=True, ray=f"ray_address={ray_local.address!r}", **args),
        env=env,
        cwd=ROOT,
    )
    try:
        assert await asyncio.wait_for(second.wait(), 240) == 0
    finally:
        await end_tree(second)
    trials = json.loads(report.read_text())
    assert len(trials) == 6  # num_samples, no more
    for trial_id, (state, _x, its) in trials.items():
        assert state == "TERMINATED"
        assert its == list(range(1, 9)), (trial_id, its)
        setups = (marks / f"{trial_id}.setups").read_text()
        if trial_id in finished_before:
            assert setups == "x"  # never re-run
        else:
            assert len(setups) <= 2
    xs = [x for _state, x, _its in trials.values()]
    assert len(set(xs)) == 6  # every sample drawn once: the searcher's state was restored
