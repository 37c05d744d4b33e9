"""``Orchestrator.end_sweep``: a sweep ended from a hook asks for no more trials, stops the
ones running (TERMINATED, results kept) and returns; a resumed experiment does not
continue it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, TrialState
from orchestrator.search import uniform

from .trainables import counting

pytestmark = pytest.mark.usefixtures("ray_local")


async def test_a_sweep_ended_from_a_hook_stops_its_trials_and_starts_no_more(
    tmp_path: Path,
) -> None:
    class EndAtThree:
        def __init__(self) -> None:
            self.orch: Orchestrator | None = None

        def on_trial_result(self, trial: Any, result: dict[str, Any]) -> None:
            if result["count"] >= 3 and self.orch is not None:
                self.orch.end_sweep("s")  # a sync hook: it runs in a thread

    hook = EndAtThree()
    async with Orchestrator(storage=tmp_path, name="ended", hooks=[hook], progress=False) as orch:
        hook.orch = orch
        result = await orch.sweep(
            counting,
            {"x": uniform(0, 1), "delay": 0.05},
            num_samples=20,
            max_concurrent_trials=2,
            resources={"cpu": 0.25},
            name="s",
        )
        assert orch.trials and all(t.state is TrialState.TERMINATED for t in orch.trials)
    assert 1 <= len(result.trials) < 20
    assert all(t.last_result is not None for t in result.trials[:1])
    assert max(t.iteration for t in result.trials) < 1000

    async with Orchestrator(storage=tmp_path, name="ended", resume=True, progress=False) as orch:
        again = await orch.sweep(
            counting,
            {"x": uniform(0, 1), "delay": 0.05},
            num_samples=20,
            max_concurrent_trials=2,
            resources={"cpu": 0.25},
            name="s",
        )
    assert [t.id for t in again.trials] == [t.id for t in result.trials]
