"""A hook's request on a result takes effect under the default (adaptive) buffering."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Checkpoint, Orchestrator, Trial, TrialState

from .trainables import Counter

pytestmark = pytest.mark.usefixtures("ray_local")

CPU = {"cpu": 0.25}


async def test_a_hook_restore_at_a_result_takes_effect(tmp_path: Path) -> None:
    """The public-API check: 4 trials, checkpoint_every=5, a hook restores one trial to
    its first checkpoint on result 12. Trivial steps run ahead of the hooks."""
    seen: dict[str, list[int]] = {}
    restored: list[tuple[str, int]] = []
    target: list[str] = []

    class RollBack:
        async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
            seen.setdefault(trial.id, []).append(result["training_iteration"])
            if trial.id == target[0] and result["training_iteration"] == 12 and not restored:
                await trial.restore(trial.checkpoints[0])

        def on_trial_restore(self, trial: Trial, checkpoint: Checkpoint) -> None:
            restored.append((trial.id, checkpoint.iteration))

    async with Orchestrator(storage=tmp_path, name="hookreq", hooks=[RollBack()]) as orch:
        trials = [
            orch.add_trial(
                Counter,
                {"i": i},
                stop={"training_iteration": 20},
                checkpoint_every=5,
                resources=CPU,
            )
            for i in range(4)
        ]
        target.append(trials[0].id)
        returned = await orch.run()
        assert all(t.state is TrialState.TERMINATED for t in returned)
    victim = trials[0]
    assert restored == [(victim.id, 5)]
    assert [r["training_iteration"] for r in victim.results] == list(range(1, 21))
    assert all(r["count"] == r["training_iteration"] for r in victim.results)
    # Every result in order: 1..12, those of the abandoned run reported before the
    # restore landed (at most two calls of 5 past 12), then 6..20 of the new run.
    got = seen[victim.id]
    abandoned = len(got) - 12 - 15
    assert 0 <= abandoned <= 8, got
    assert got == [*range(1, 13 + abandoned), *range(6, 21)]
    for t in trials[1:]:
        assert seen[t.id] == list(range(1, 21))


async def test_a_hook_brings_back_a_terminated_trial_and_run_waits_for_it(
    tmp_path: Path,
) -> None:
    """README: restore brings back a TERMINATED trial; from a hook, run() returns only
    once it has run again and settled."""
    complete: list[int] = []

    class Again:
        async def on_trial_complete(self, trial: Trial) -> None:
            complete.append(trial.iteration)
            if len(complete) == 1:
                assert trial.state is TrialState.TERMINATED
                await trial.restore(trial.checkpoints[0])

    async with Orchestrator(storage=tmp_path, name="again", hooks=[Again()]) as orch:
        trial = orch.add_trial(
            Counter, stop={"training_iteration": 20}, checkpoint_every=5, resources=CPU
        )
        await orch.run()
        assert trial.state is TrialState.TERMINATED
    assert complete == [20, 20]
    assert [r["training_iteration"] for r in trial.results] == list(range(1, 21))
    assert trial.discarded_results == 15


async def test_a_blocked_result_hook_holds_its_trial_within_two_calls(tmp_path: Path) -> None:
    """Defaults (adaptive buffering, trivial steps): while a user's result hook is stuck
    on result 1, the trial trains at most two calls (of at most ADAPTIVE_MAX_STEPS
    steps) further, instead of running away from it."""
    from orchestrator.core.spec import ADAPTIVE_MAX_STEPS

    bound = 2 * ADAPTIVE_MAX_STEPS
    observed: list[int] = []

    class Stuck:
        async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
            if result["training_iteration"] == 1:
                loop = asyncio.get_running_loop()
                give_up = loop.time() + 3.0  # the trial passing the bound ends it sooner
                while trial.iteration <= bound and loop.time() < give_up:
                    await asyncio.sleep(0.05)
                observed.append(trial.iteration)
                await trial.stop()

    async with Orchestrator(storage=tmp_path, name="paced", hooks=[Stuck()]) as orch:
        trial = orch.add_trial(Counter, stop={"training_iteration": 50 * bound}, resources=CPU)
        await orch.run()
    assert trial.state is TrialState.TERMINATED
    assert 1 <= observed[0] <= bound, observed
