"""A function trainable runs on past a result while it travels to the driver, in whole
experiments on the fake Ray: its ``report()`` returns before the driver's next request
reaches the actor, and it still never runs past a decision (a scheduler's milestone,
an iteration limit, a stop threshold). The actor's side: ``tests/actor/test_function_run_on.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from orchestrator import TrialState, report
from orchestrator.actor.function import current_trial_id
from orchestrator.schedulers import ASHA
from orchestrator.search import grid

from ..support.fake_engine import MakeOrchestrator, until
from ..support.fakeray import TRAIN, FakeRay

CPU = {"cpu": 0.25}


def marking(config: dict[str, Any]) -> None:
    """Touches ``<trial>-start-<i>`` as step ``i`` begins and ``<trial>-past-<i>`` once
    its report returned; ``score`` grows with ``slope``."""
    marks, me = Path(config["marks"]), current_trial_id()
    for i in range(1, config.get("iters", 3) + 1):
        (marks / f"{me}-start-{i}").touch()
        report({"i": i, "score": i * config.get("slope", 1.0)})
        (marks / f"{me}-past-{i}").touch()


def started(marks: Path, trial_id: str) -> int:
    """The last step the trial's function began."""
    return max(int(p.name.rsplit("-", 1)[1]) for p in marks.glob(f"{trial_id}-start-*"))


async def test_report_returns_before_the_drivers_next_request_arrives(
    tmp_path: Path, orchestrator: MakeOrchestrator, fake_ray: FakeRay
) -> None:
    """The driver's second train call is held before it reaches the actor; the
    function's first ``report()`` returns meanwhile (it blocked until that call, one
    round trip a result, before run-on). One step per call (``result_buffer=1``)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    async with orchestrator(storage=tmp_path, name="run-on", result_buffer=1) as orch:
        trial = orch.add_trial(marking, {"marks": str(marks)}, resources=CPU)
        gate = fake_ray.hold(TRAIN, trial=trial.id, after=1)
        runner = asyncio.create_task(orch.run())
        try:
            await gate.reached()
            await until(lambda: (marks / f"{trial.id}-past-1").exists())
            assert not (marks / f"{trial.id}-past-2").exists()  # report 2 waits for its call
            assert len(trial.results) == 1
        finally:
            gate.open()
        await runner
    assert trial.state is TrialState.TERMINATED, trial.error
    assert [r["i"] for r in trial.results] == [1, 2, 3]
    assert [r["training_iteration"] for r in trial.results] == [1, 2, 3]


async def test_run_on_never_passes_a_stop_or_a_schedulers_milestone(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    """Trials stopped by an iteration limit, a stop threshold, or ASHA at a rung: each
    has exactly the results up to its stop, and its function never began the step
    after its last result (a naive run-on would begin it and abandon it)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    base = {"marks": str(marks), "iters": 8}
    async with orchestrator(storage=tmp_path, name="exact", result_buffer=1) as orch:
        limit = orch.add_trial(marking, base, stop={"training_iteration": 3}, resources=CPU)
        threshold = orch.add_trial(marking, base, stop={"i": 4}, resources=CPU)
        await orch.run()
        swept = await orch.sweep(
            marking,
            {**base, "slope": grid([4.0, 3.0, 2.0, 1.0])},
            metric="score",
            mode="max",
            scheduler=ASHA(max_t=8, grace_period=2, reduction_factor=2),
            max_concurrent_trials=1,  # in order: each later trial is worse than the ones before
            result_buffer=1,
            resources=CPU,
        )
    assert [len(limit.results), len(threshold.results)] == [3, 4]
    trials = [limit, threshold, *swept.trials]
    for trial in trials:
        assert trial.state is TrialState.TERMINATED, trial.error
        assert started(marks, trial.id) == len(trial.results), trial.id
    lengths = sorted(len(t.results) for t in swept.trials)
    assert lengths[0] < 8  # ASHA stopped one at a rung, not only at max_t
