"""``Orchestrator(resume=True, resume_errored=...)`` on a sweep that ended with a trial
in ERROR: ``True`` runs it again from its newest checkpoint, ``"restart"`` from scratch
(its results and failures start again), and the ended sweep asks its searcher for
nothing new."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, Trainable

pytestmark = pytest.mark.usefixtures("ray_local")


class FailsOnce(Trainable):
    """Counts; its first attempt fails at step 3 (a marker file says it did)."""

    def setup(self, config: dict[str, Any]) -> None:
        self.n = 0
        self.started = 0

    def step(self) -> dict[str, Any]:
        self.n += 1
        if self.n == 3 and not os.path.exists(self.config["marker"]):
            Path(self.config["marker"]).touch()
            raise RuntimeError("first attempt fails")
        return {"n": self.n, "started": self.started}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        Path(checkpoint_dir, "n").write_text(str(self.n))

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        self.n = self.started = int(Path(checkpoint_dir, "n").read_text())


async def sweep(storage: Path, marker: Path, **resume: Any) -> Any:
    async with Orchestrator(storage=str(storage), name="errs", progress=False, **resume) as orch:
        return await orch.sweep(
            FailsOnce,
            {"marker": str(marker)},
            stop={"training_iteration": 5},
            checkpoint_every=1,
            name="s",
        )


@pytest.mark.parametrize(("how", "started"), [(True, 2), ("restart", 0)])
def test_an_ended_sweeps_errored_trial_runs_again(tmp_path: Path, how: Any, started: int) -> None:
    marker = tmp_path / "marker"
    first = asyncio.run(sweep(tmp_path / "store", marker))
    assert [t.state.value for t in first.trials] == ["ERROR"]
    again = asyncio.run(sweep(tmp_path / "store", marker, resume=True, resume_errored=how))
    (trial,) = again.trials
    assert trial.state.value == "TERMINATED" and trial.id == first.trials[0].id
    assert trial.last_result["n"] == 5 and trial.last_result["started"] == started
