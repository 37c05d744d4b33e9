"""Schedulers on real Ray: a PBT sweep survives its killed driver (and the Ray it
started). Their decisions landing exactly, paused trials freeing resources, exploits and
killed actors run on the fake Ray: ``tests/engine/test_schedulers_run.py``."""

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
LRS = [0.01, 0.1, 1.0, 10.0]


DRIVER = textwrap.dedent(
    """
    import asyncio, json, sys
    sys.path.insert(0, {root!r})
    from orchestrator import Orchestrator
    from orchestrator.schedulers import PBT
    from orchestrator.search import grid
    from tests.support.trainables import Climber

    async def main():
        async with Orchestrator(storage={storage!r}, name="pbt", {ray},
                                keep_checkpoints=1, resume={resume!r}) as orch:
            scheduler = PBT(perturbation_interval=4, hyperparam_mutations={{"lr": {lrs!r}}},
                            seed=1)
            result = await orch.sweep(
                Climber, {{"lr": grid({lrs!r}), "marks": {marks!r}, "delay": 0.1,
                                  "gate": {gate!r}, "gate_at": 12}},
                metric="score", mode="max", scheduler=scheduler, checkpoint_every=2,
                stop={{"training_iteration": 40}}, resources={{"cpu": 0.25}})
        with open({report!r}, "w") as f:
            json.dump({{"lineage": scheduler.lineage,
                       "trials": {{t.id: [t.state.value, t.iteration]
                                  for t in result.trials}}}}, f)
    asyncio.run(main())
    """
)


async def test_a_pbt_sweep_resumes_after_its_driver_was_killed(
    tmp_path: Path, ray_local: Any
) -> None:
    from ..support.drivers import kill_with_its_ray

    storage, report, marks = tmp_path / "store", tmp_path / "report.json", tmp_path / "marks"
    gate = tmp_path / "gate"  # every trial waits there after 12 steps: the sweep cannot end
    marks.mkdir()
    gate.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = {
        "root": str(ROOT),
        "storage": str(storage),
        "report": str(report),
        "marks": str(marks),
        "gate": str(gate),
        "lrs": LRS,
    }
    first = subprocess.Popen(
        [sys.executable, "-c", DRIVER.format(resume=False, ray="num_cpus=2", **args)],
        env=env,
        cwd=str(ROOT),
    )
    journal = storage / "pbt" / JOURNAL_KEY
    lineage_before: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            assert first.poll() is None, "the driver exited while its trials were held"
            try:
                doc = json.loads(journal.read_text())
            except (OSError, ValueError):
                continue
            sweeps = doc.get("sweeps") or [{}]
            lineage_before = sweeps[0].get("lineage") or []
            if lineage_before:
                break
        else:
            pytest.fail("no exploit reached the journal")
    finally:
        kill_with_its_ray(first)
    (gate / "open").touch()
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
    final = json.loads(report.read_text())
    assert all(state == "TERMINATED" and it == 40 for state, it in final["trials"].values()), final
    assert final["lineage"][: len(lineage_before)] == lineage_before  # its history kept
