"""Schedulers on the fake Ray: decisions land exactly at their points, paused trials
free their resources, PBT's exploits are restores from another trial's checkpoint with a
new config, and all of it survives killed actors. (Moved from
``tests/sweeps/test_schedulers_ray.py``, which keeps a PBT sweep resumed after its real driver
was killed.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, Trial, TrialState
from orchestrator.core.journal_format import JOURNAL_KEY
from orchestrator.schedulers import ASHA, PBT, HyperBand
from orchestrator.search import grid
from orchestrator.sweeps import driver as sweep_module

from ..support.cluster import HEAD_CPUS
from ..support.fake_engine import MakeOrchestrator
from ..support.fakeray import FakeRay
from ..support.journal_files import head_trials
from ..support.trainables import counting
from .trainables import FakeClimber, FakeCurve, FakeStubbornClimber

CPU = {"cpu": 0.25}
LRS = [0.01, 0.1, 1.0, 10.0]
# Best first, so that ASHA's outcome does not hang on timing: in ascending order every
# newcomer may beat all records at each rung and asynchronous ASHA may stop none (on a
# loaded CI machine it stopped none); best first, each trial that starts once a slot frees
# meets better records at rung 1 and stops there, and plateau 9 leads at every rung.
BEST_FIRST = [float(p) for p in range(9, 0, -1)]


def asha_rungs() -> dict[str, Any]:
    """The sweep options of the ASHA rung tests: rungs 1, 3, 9 and 27, three trials at a
    time, a criterion (100) no judged trial reaches; a new scheduler each call."""
    return {
        "metric": "acc",
        "mode": "max",
        "scheduler": ASHA(max_t=27, grace_period=1, reduction_factor=3),
        "max_concurrent_trials": 3,
        "stop": {"training_iteration": 100},
        "resources": CPU,
    }


async def test_asha_stops_buffered_trials_exactly_at_their_rungs(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="asha", result_buffer=10) as orch:
        result = await orch.sweep(
            FakeCurve,
            {"plateau": grid(BEST_FIRST), "marks": str(tmp_path)},
            **asha_rungs(),
        )
    rungs = {1, 3, 9, 27}
    ends = sorted(len(t.results) for t in result.trials)
    assert all(t.state is TrialState.TERMINATED for t in result.trials)
    assert set(ends) <= rungs, ends  # never rung + 1, though the actor could run 10 ahead
    assert ends[0] < 27 and ends[-1] == 27  # some stopped early; the best ran to max_t
    assert result.best_trial.config["plateau"] >= 7.0
    for trial in result.trials:
        assert [r["training_iteration"] for r in trial.results] == list(
            range(1, len(trial.results) + 1)
        )
    # The journal says who stopped each trial, where, on which value (show and the
    # dashboard read it), and ASHA's rungs as plain data (its state is a pickle).
    head = json.loads((tmp_path / "asha" / JOURNAL_KEY).read_text())
    assert head["sweeps"][0]["rungs"] == [[1, 3, 9]]  # max_t ends every trial
    for trial, entry in zip(result.trials, head_trials(tmp_path / "asha"), strict=True):
        stops = [e for e in entry.get("events", []) if e["kind"] == "stop"]
        assert stops == [
            {
                "kind": "stop",
                "iteration": len(trial.results),
                "by": "ASHA",
                "metric": "acc",
                "value": trial.results[-1]["acc"],
            }
        ], entry.get("events")


async def test_a_resumed_sweeps_trials_are_judged_by_its_scheduler(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    """A sweep left while its first trials ran: the same call after resume=True claims
    them (adopted from the journal when the experiment was entered, before the call) and
    ASHA judges them again: every trial ends at a rung, none runs on to its criterion.
    Steps of a second until the resume: the first sweep cannot end before it is left,
    however late a loaded machine lets the test look."""
    fast, storage = tmp_path / "fast", tmp_path / "store"

    def sweep(orch: Orchestrator) -> Any:
        return orch.sweep(
            FakeCurve,
            {"plateau": grid(BEST_FIRST), "delay": 1.0, "fast_after": str(fast)},
            **asha_rungs(),
        )

    async with orchestrator(storage=storage, name="asha") as orch:
        first = asyncio.ensure_future(sweep(orch))
        deadline = time.monotonic() + 120
        while not any(t.iteration >= 2 and not t.state.is_settled for t in orch.trials):
            assert time.monotonic() < deadline and not first.done()
            await asyncio.sleep(0.05)
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
    fast.touch()  # the rest runs fast
    async with orchestrator(storage=storage, name="asha", resume=True) as orch:
        interrupted = {t.id for t in orch.trials if t.state is TrialState.PENDING}
        result = await sweep(orch)
    assert interrupted
    ends = {t.id: len(t.results) for t in result.trials}
    assert all(t.state is TrialState.TERMINATED for t in result.trials)
    assert set(ends.values()) <= {1, 3, 9, 27}, ends  # judged: none ran on to 100
    assert min(ends.values()) < 27 and max(ends.values()) == 27


async def test_asha_stops_buffered_function_trials_exactly_at_their_rungs(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    """A function trainable's reports are held at each one until the driver asks for the
    next: with 10 reports a call, ASHA still ends every trial on a rung."""
    async with orchestrator(storage=tmp_path, name="asha-fn", result_buffer=10) as orch:
        result = await orch.sweep(
            counting,
            {"plateau": grid(BEST_FIRST), "every": 3},
            **asha_rungs(),
        )
    ends = sorted(len(t.results) for t in result.trials)
    assert all(t.state is TrialState.TERMINATED for t in result.trials)
    assert set(ends) <= {1, 3, 9, 27}, ends
    assert ends[0] < 27 and ends[-1] == 27
    assert result.best_trial.config["plateau"] >= 7.0
    for trial in result.trials:
        assert [r["count"] for r in trial.results] == list(range(1, len(trial.results) + 1))


async def test_hyperband_pauses_trials_at_milestones_and_resumes_the_best(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    paused_with_actor: list[str] = []

    async def watch(orch: Orchestrator) -> None:
        while True:
            for trial in orch.trials:
                if trial.state is TrialState.PAUSED and trial.actor is not None:
                    paused_with_actor.append(trial.id)
            await asyncio.sleep(0.02)

    async with orchestrator(storage=tmp_path, name="hb") as orch:
        watcher = asyncio.create_task(watch(orch))
        result = await orch.sweep(
            FakeCurve,
            {"plateau": grid([float(p) for p in range(1, 10)]), "marks": str(tmp_path)},
            metric="acc",
            mode="max",
            scheduler=HyperBand(max_t=9, reduction_factor=3),
            max_concurrent_trials=3,  # the bracket's 9 trials fit only if paused ones leave
            stop={"training_iteration": 100},
            resources=CPU,
        )
        watcher.cancel()
    by_plateau = {t.config["plateau"]: len(t.results) for t in result.trials}
    assert all(t.state is TrialState.TERMINATED for t in result.trials)
    assert by_plateau[9.0] == 9 and by_plateau[8.0] == 3 and by_plateau[7.0] == 3
    assert all(by_plateau[p] == 1 for p in range(1, 7))
    assert not paused_with_actor  # a paused trial holds no actor, nor its resources
    winner = next(t for t in result.trials if t.config["plateau"] == 9.0)
    assert [r["count"] for r in winner.results] == list(range(1, 10))  # resumed, not redone


def pbt(**kwargs: Any) -> PBT:
    return PBT(
        perturbation_interval=4,
        hyperparam_mutations={"lr": LRS},
        quantile_fraction=0.25,
        resample_probability=0.5,
        seed=1,
        **kwargs,
    )


async def run_pbt(
    orchestrator: MakeOrchestrator,
    tmp_path: Path,
    trainable: type,
    *,
    fake_ray: FakeRay | None = None,
    **options: Any,
) -> tuple[list[Trial], list[dict[str, Any]]]:
    scheduler = pbt()

    async def kill_some(orch: Orchestrator, fake_ray: FakeRay) -> None:
        rng = random.Random(3)
        for _ in range(3):
            await asyncio.sleep(1.0)
            running = [t for t in orch.trials if t.state is TrialState.RUNNING and t.last_result]
            if running:
                victim = rng.choice(running)
                assert victim.last_result is not None
                try:
                    fake_ray.kill_worker(victim.last_result["pid"])
                except ProcessLookupError:
                    pass

    async with orchestrator(
        storage=tmp_path, name="pbt", keep_checkpoints=1, max_failures=-1, **options
    ) as orch:
        chaos_task = asyncio.create_task(kill_some(orch, fake_ray)) if fake_ray else None
        result = await orch.sweep(
            trainable,
            {"lr": grid([0.01, 0.1, 1.0, 10.0]), "marks": str(tmp_path), "delay": 0.05},
            metric="score",
            mode="max",
            scheduler=scheduler,
            checkpoint_every=2,
            stop={"training_iteration": 24},
            resources=CPU,
        )
        if chaos_task is not None:
            chaos_task.cancel()
    return result.trials, scheduler.lineage


async def test_pbt_exploits_with_one_checkpoint_kept_and_killed_actors(
    tmp_path: Path, fake_ray: FakeRay, orchestrator: MakeOrchestrator
) -> None:
    trials, lineage = await run_pbt(orchestrator, tmp_path, FakeClimber, fake_ray=fake_ray)
    for trial in trials:
        assert trial.state is TrialState.TERMINATED, trial.error
        assert "does not exist" not in " ".join(str(e) for e in trial.errors)
        its = [r["training_iteration"] for r in trial.results]
        assert its == sorted(set(its)) and its[-1] == 24
        assert all(r["config"]["lr"] in LRS for r in trial.results)
    assert lineage, "no exploit happened"
    for n, entry in enumerate(lineage):
        assert entry["new_config"]["lr"] in LRS
        clone = next(t for t in trials if t.id == entry["trial_id"])
        after = [r for r in clone.results if r["training_iteration"] > entry["time"]]
        # Its results go on with the new config, unless a later exploit of the same trial
        # replaced it (one of an older checkpoint re-decides the boundaries after it).
        assert any(r["config"]["lr"] == entry["new_config"]["lr"] for r in after) or any(
            e["trial_id"] == clone.id for e in lineage[n + 1 :]
        )


async def test_reset_config_keeps_the_process_and_refusing_it_starts_a_new_one(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    def setups(root: Path, trial: Trial) -> int:
        return len((root / f"{trial.id}.setups").read_text())

    for trainable, root in (
        (FakeClimber, tmp_path / "reset"),
        (FakeStubbornClimber, tmp_path / "no"),
    ):
        root.mkdir()
        trials, lineage = await run_pbt(orchestrator, root, trainable)
        exploited = {e["trial_id"] for e in lineage}
        assert exploited
        for trial in trials:
            if trainable is FakeClimber:  # taken in place: the same trainable, no new worker
                assert setups(root, trial) == 1 and len({r["pid"] for r in trial.results}) == 1
            else:  # a new trainable each time, set up with the explored config
                assert setups(root, trial) == 1 + sum(e["trial_id"] == trial.id for e in lineage)


async def test_restore_with_a_new_config_continues_with_it(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    class Retune:
        done = False

        async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
            if result["training_iteration"] == 6 and not self.done:
                self.done = True
                older = trial.checkpoints[0]
                await trial.restore(older, config={**trial.config, "lr": 5.0})

    async with orchestrator(storage=tmp_path, name="retune", hooks=[Retune()]) as orch:
        trial = orch.add_trial(
            FakeClimber,
            {"lr": 1.0, "marks": str(tmp_path)},
            stop={"training_iteration": 10},
            checkpoint_every=2,
            resources=CPU,
        )
        await orch.run()
    assert trial.state is TrialState.TERMINATED and trial.config["lr"] == 5.0
    its = [r["training_iteration"] for r in trial.results]
    assert its == list(range(1, 11))
    restored_at = next(i for i, r in enumerate(trial.results) if r["lr"] == 5.0)
    assert 1 <= restored_at < 6
    assert trial.results[-1]["score"] == restored_at * 1.0 + (10 - restored_at) * 5.0
    assert len({r["pid"] for r in trial.results}) == 1


class Arrivals:
    """Every result's (trial, iteration), in the order the driver handled them (an
    inline hook: called in the loop as each result is handled, not queued per trial)."""

    inline_hooks = frozenset({"on_trial_result"})

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
        self.seen.append((trial.id, result["training_iteration"]))


async def test_asynchronous_pbt_keeps_a_staggered_population_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, orchestrator: MakeOrchestrator
) -> None:
    """Trivial steps and workers that start one after another: without the lead bound
    the first trial ends before the last begins. With it (max_lead=1, interval 4), no
    trial runs past iteration 8 before every trial has reported iteration 4; held
    trials keep their actors and their histories stay exact. No checkpoints, so no
    exploit moves a trial ahead."""
    monkeypatch.setattr(sweep_module, "HOLD_PATIENCE_S", 300.0)  # slow starts are waited for
    arrivals = Arrivals()
    async with orchestrator(storage=tmp_path, name="together", hooks=[arrivals]) as orch:
        result = await orch.sweep(
            FakeClimber,
            {"lr": grid([0.01, 0.1, 1.0, 10.0]), "marks": str(tmp_path)},
            metric="score",
            mode="max",
            scheduler=pbt(),
            stop={"training_iteration": 24},
            resources=CPU,
            reuse_actors=False,
        )
    for trial in result.trials:
        assert trial.state is TrialState.TERMINATED, trial.error
        assert [r["training_iteration"] for r in trial.results] == list(range(1, 25))
    order = {entry: n for n, entry in enumerate(arrivals.seen)}
    all_at_4 = max(order[(t.id, 4)] for t in result.trials)
    first_past_8 = min(n for n, (_, it) in enumerate(arrivals.seen) if it > 8)
    assert first_past_8 > all_at_4, arrivals.seen


async def test_pbt_goes_on_when_the_trials_it_waits_for_cannot_start(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    orchestrator: MakeOrchestrator,
) -> None:
    """max_concurrent_trials above what the cluster holds: two trials run, the third
    waits for their resources. PBT holds the two at a boundary for it; once nothing has
    run for the sweep's patience, they go on without it, end, and free its resources."""
    monkeypatch.setattr(sweep_module, "HOLD_PATIENCE_S", 1.0)
    caplog.set_level(logging.INFO, logger="orchestrator.sweeps.driver")
    async with orchestrator(storage=tmp_path, name="starved") as orch:
        result = await orch.sweep(
            FakeClimber,
            # Steps slow enough that the first two cannot finish before the third trial
            # is even created (its config comes from the searcher's thread).
            {"lr": grid([0.01, 0.1, 1.0]), "marks": str(tmp_path), "delay": 0.2},
            metric="score",
            mode="max",
            scheduler=pbt(),
            max_concurrent_trials=3,
            checkpoint_every=2,
            stop={"training_iteration": 12},
            resources={"cpu": HEAD_CPUS / 2},
        )
    for trial in result.trials:
        assert trial.state is TrialState.TERMINATED, trial.error
        its = [r["training_iteration"] for r in trial.results]
        assert its == sorted(set(its)) and its[-1] == 12
    assert "going on without those" in caplog.text
