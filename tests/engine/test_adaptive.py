"""Adaptive result buffering, the default: a call runs short steps back to back for
about a time slice, a long step returns alone, and nothing about a trial's history,
checkpoints or stop depends on it. On the fake Ray: the slices are the real actor's."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Trial, TrialState
from orchestrator.core.spec import ADAPTIVE_SLICE_S

from ..support.fake_engine import MakeOrchestrator
from ..support.trainables import Counter

CPU = {"cpu": 0.25}


class Arrivals:
    """When each result reached the hooks (driver time)."""

    def __init__(self) -> None:
        self.at: dict[str, list[float]] = {}

    def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
        self.at.setdefault(trial.id, []).append(time.monotonic())


async def test_short_steps_come_in_batches_and_a_long_step_alone(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="slice", progress=False) as orch:
        short = orch.add_trial(Counter, stop={"training_iteration": 400}, resources=CPU)
        long = orch.add_trial(
            Counter, {"delay": 0.5}, stop={"training_iteration": 4}, resources=CPU
        )
        await orch.run()
        stats = orch.statistics().loop
    assert short.iteration == 400 and long.iteration == 4
    # 404 results, far fewer train calls: the short trial's came back dozens at a time.
    assert stats.events < 150, stats
    # The long trial's steps each filled the slice: one per call, each at once.
    starts = [r["time_this_iter_s"] for r in long.results]
    assert all(s >= 0.5 > ADAPTIVE_SLICE_S for s in starts)


async def test_a_long_step_is_reported_as_soon_as_it_ends(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    arrivals = Arrivals()
    async with orchestrator(
        storage=tmp_path, name="alone", hooks=[arrivals], progress=False
    ) as orch:
        trial = orch.add_trial(
            Counter, {"delay": 0.6}, stop={"training_iteration": 4}, resources=CPU
        )
        await orch.run()
    times = arrivals.at[trial.id]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert len(gaps) == 3 and all(gap > 0.4 for gap in gaps)  # never two in one batch


@pytest.mark.parametrize("stop", [{"training_iteration": 137}, {"count": 91}])
async def test_histories_and_checkpoints_equal_one_step_per_call(
    tmp_path: Path, stop: dict[str, int], orchestrator: MakeOrchestrator
) -> None:
    outcomes = []
    for buffer in (None, 1):
        async with orchestrator(
            storage=tmp_path, name=f"exact-{buffer}", result_buffer=buffer, progress=False
        ) as orch:
            trial = orch.add_trial(Counter, stop=stop, checkpoint_every=7, resources=CPU)
            await orch.run()
        assert trial.state is TrialState.TERMINATED
        outcomes.append(
            (
                [r["training_iteration"] for r in trial.results],
                [r["count"] for r in trial.results],
                [c.iteration for c in trial.checkpoints],
            )
        )
    assert outcomes[0] == outcomes[1]


async def test_a_stop_lands_within_about_a_slice(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="lag", progress=False) as orch:
        trial = orch.add_trial(Counter, stop={"training_iteration": 10**7}, resources=CPU)
        runner = asyncio.create_task(orch.run())
        while trial.iteration < 500:
            await asyncio.sleep(0.01)
        asked = time.monotonic()
        await trial.stop()
        lag = time.monotonic() - asked
        await runner
    assert trial.state is TrialState.TERMINATED
    assert lag < 2.0  # the call in flight (about 20 ms of steps), then the stop itself


async def test_the_steps_before_a_failing_one_in_a_batch_are_kept(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    """A buffered call whose fifth step raises: the four before it are results, as one
    step per call would have made them; the error fails the trial after them."""
    async with orchestrator(storage=tmp_path, name="fails", progress=False) as orch:
        trial = orch.add_trial(
            Counter, {"fail_at": 5}, stop={"training_iteration": 50}, resources=CPU
        )
        await orch.run()
    assert trial.state is TrialState.ERROR and "planned failure at 5" in str(trial.error)
    assert [r["training_iteration"] for r in trial.results] == [1, 2, 3, 4]
