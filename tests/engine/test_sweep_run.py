"""``Orchestrator.sweep`` on the fake Ray: search spaces over trials, bounded
concurrency, actor reuse, results, and every bad input before any trial (moved from
``tests/sweeps/test_sweep.py``, which keeps a sweep resumed after its real driver was killed).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter as Tally
from pathlib import Path
from typing import Any

import pytest

from orchestrator import ConfigError, Trial, TrialState
from orchestrator.search import OptunaSearch, RandomSearch, choice, grid, sample_from, uniform

from ..support.fake_engine import MakeOrchestrator
from ..support.fakeray import FakeRay
from .trainables import FakeObjective

CPU = {"cpu": 0.25}


def space(marks: Path, **extra: Any) -> dict[str, Any]:
    return {"x": uniform(-1, 1), "y": uniform(-1, 1), "marks": str(marks), **extra}


async def test_grid_times_samples_and_the_best_trial(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="grid") as orch:
        result = await orch.sweep(
            FakeObjective,
            space(
                tmp_path,
                opt={"name": grid(["sgd", "adam"]), "layers": choice([2, 4])},
                wd=sample_from(lambda cfg: cfg["x"] / 10),
            ),
            num_samples=3,
            metric="loss",
            mode="min",
            stop={"training_iteration": 4},
            resources=CPU,
            seed=7,
        )
    assert len(result.trials) == 6
    assert Tally(t.config["opt"]["name"] for t in result.trials) == {"sgd": 3, "adam": 3}
    assert all(t.config["wd"] == t.config["x"] / 10 for t in result.trials)
    assert all(t.state is TrialState.TERMINATED for t in result.trials)
    losses = {t.id: t.last_result["loss"] for t in result.trials if t.last_result}
    assert result.best_trial.id == min(losses, key=losses.__getitem__)
    assert result.best_config == result.best_trial.config
    assert result.best_result["loss"] == min(losses.values())
    assert result.get_best("loss", "max").id == max(losses, key=losses.__getitem__)
    frame = result.dataframe()
    assert len(frame) == 6 and {"config/x", "config/opt/name", "loss"} <= set(frame.columns)
    with pytest.raises(ConfigError, match="no trial reported the metric 'acc'.*loss"):
        result.get_best("acc", "max")


async def test_concurrency_is_bounded_and_actors_are_reused(
    tmp_path: Path, fake_ray: FakeRay, orchestrator: MakeOrchestrator
) -> None:
    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, len(fake_ray.trial_actors()))
            await asyncio.sleep(0.05)

    async with orchestrator(storage=tmp_path, name="bound") as orch:
        watcher = asyncio.create_task(watch())
        result = await orch.sweep(
            FakeObjective,
            space(tmp_path, delay=0.02),
            num_samples=10,
            metric="loss",
            mode="min",
            max_concurrent_trials=2,
            stop={"training_iteration": 5},
            resources=CPU,
        )
        watcher.cancel()
    assert len(result.trials) == 10 and all(t.state is TrialState.TERMINATED for t in result.trials)
    assert 1 <= peak <= 2  # never more than two trial actors alive at once
    pids = {r["pid"] for t in result.trials for r in t.results}
    assert len(pids) <= 3  # ten trials in two reused processes (three if one was slow to go)


async def test_without_reuse_each_trial_has_its_own_process(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="noreuse") as orch:
        result = await orch.sweep(
            FakeObjective,
            space(tmp_path),
            num_samples=4,
            max_concurrent_trials=2,
            stop={"training_iteration": 2},
            resources=CPU,
            reuse_actors=False,
        )
    assert len({r["pid"] for t in result.trials for r in t.results}) == 4


async def test_a_failed_trial_never_hands_on_its_process(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="fail") as orch:
        result = await orch.sweep(
            FakeObjective,
            {"x": grid([0.0, 1.0]), "marks": str(tmp_path), "fail_at": 2},
            max_concurrent_trials=1,
            stop={"training_iteration": 3},
            resources=CPU,
        )
    assert all(t.state is TrialState.ERROR for t in result.trials)
    first, second = ([r["pid"] for r in t.results] for t in result.trials)
    assert set(first).isdisjoint(second)
    assert len(result.errors) == 2 and "planned failure" in str(result.errors[0])


async def test_optuna_search_drives_a_real_sweep(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="optuna") as orch:
        result = await orch.sweep(
            FakeObjective,
            space(tmp_path),
            num_samples=6,
            metric="loss",
            mode="min",
            searcher=OptunaSearch(seed=3),
            max_concurrent_trials=2,
            stop={"training_iteration": 3},
            resources=CPU,
        )
    assert len(result.trials) == 6 and all(t.state is TrialState.TERMINATED for t in result.trials)
    assert len(result.best_trial.results) == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"space": {"lr": choice([])}}, "'lr'"),
        ({"space": {"lr": uniform(1, 0)}}, "'lr'"),
        ({"num_samples": 0}, "num_samples must be an int >= 1"),
        ({"metric": "loss"}, "metric and mode together"),
        ({"mode": "best", "metric": "loss"}, "mode must be 'min' or 'max'"),
        ({"searcher": object()}, "searcher must be an orchestrator.search.Searcher"),
        ({"scheduler": "asha"}, "scheduler must be an orchestrator.schedulers.Scheduler"),
        ({"max_concurrent_trials": 0}, "max_concurrent_trials must be an int >= 1"),
        (
            {
                "searcher": OptunaSearch(),
                "space": {"g": grid([1, 2])},
                "metric": "loss",
                "mode": "min",
            },
            "grid",
        ),
        ({"trainable": dict}, "neither a subclass of orchestrator.Trainable"),
        ({"resources": {"cpu": -1}}, "resource 'cpu'"),
        ({"space": {"bad": sample_from(lambda cfg: 1 / 0)}}, "'bad'"),
    ],
)
async def test_bad_sweeps_fail_before_any_trial_starts(
    tmp_path: Path, kwargs: dict[str, Any], message: str, orchestrator: MakeOrchestrator
) -> None:
    call: dict[str, Any] = {"trainable": FakeObjective, "space": {"x": uniform(0, 1)}, **kwargs}
    async with orchestrator(storage=tmp_path, name="bad") as orch:
        with pytest.raises(ConfigError, match=message):
            await orch.sweep(**call, stop={"training_iteration": 1})
        assert all(t.iteration == 0 for t in orch.trials)


async def test_a_trial_of_a_sweep_is_an_ordinary_trial(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    """Hooks see sweep trials, and a request on one works as on any trial."""
    seen: list[str] = []

    class Hook:
        async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
            seen.append(trial.id)
            if trial.id.endswith("00000") and result["training_iteration"] == 2:
                await trial.stop()

    async with orchestrator(storage=tmp_path, name="hooks", hooks=[Hook()]) as orch:
        result = await orch.sweep(
            FakeObjective,
            space(tmp_path, delay=0.05),
            num_samples=2,
            stop={"training_iteration": 20},
            resources=CPU,
        )
    first, second = result.trials
    assert first.state is TrialState.TERMINATED and first.iteration < 20
    assert second.iteration == 20
    assert {first.id, second.id} <= set(seen)


class WatchedSearch(RandomSearch):
    """Random search that notes how many trial actors the fake Ray holds when the sweep
    sets it up (before any trial exists). The fake is a class attribute: the sweep's
    call, searcher included, is pickled into the journal."""

    fake: FakeRay | None = None

    def __init__(self, fake: FakeRay) -> None:
        super().__init__()
        WatchedSearch.fake = fake
        self.actors_at_setup: int | None = None
        self.pids_at_setup: set[int] = set()

    def setup(self, space: Any, **kwargs: Any) -> None:
        assert WatchedSearch.fake is not None
        self.actors_at_setup = len(WatchedSearch.fake.trial_actors())
        self.pids_at_setup = {a.pid for a in WatchedSearch.fake.trial_actors()}
        super().setup(space, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        return {
            k: v for k, v in self.__dict__.items() if k not in ("actors_at_setup", "pids_at_setup")
        }


async def test_a_sweep_starts_its_workers_before_its_searcher_is_set_up(
    tmp_path: Path, fake_ray: FakeRay, orchestrator: MakeOrchestrator
) -> None:
    searcher = WatchedSearch(fake_ray)
    async with orchestrator(storage=tmp_path, name="warm") as orch:
        result = await orch.sweep(
            FakeObjective,
            space(tmp_path),
            num_samples=6,
            searcher=searcher,
            max_concurrent_trials=3,
            stop={"training_iteration": 2},
            resources=CPU,
        )
    assert all(t.state is TrialState.TERMINATED for t in result.trials)
    # One worker per trial running at once, started first; the trials ran in them. (How
    # many later trials reuse them rather than a new worker depends on which of a trial's
    # end and the next admission comes first: the bound is tested below.)
    assert searcher.actors_at_setup == 3
    assert searcher.pids_at_setup <= {r["pid"] for t in result.trials for r in t.results}


async def test_workers_started_for_a_sweep_are_bounded_by_its_trials_and_the_cluster(
    tmp_path: Path, fake_ray: FakeRay, orchestrator: MakeOrchestrator
) -> None:
    few, big = WatchedSearch(fake_ray), WatchedSearch(fake_ray)
    async with orchestrator(storage=tmp_path, name="bounded") as orch:
        await orch.sweep(
            FakeObjective,
            space(tmp_path),
            num_samples=2,  # fewer trials than slots: two workers, not five
            searcher=few,
            max_concurrent_trials=5,
            stop={"training_iteration": 1},
            resources=CPU,
            name="few",
        )
        await orch.sweep(
            FakeObjective,
            space(tmp_path),
            num_samples=8,
            searcher=big,
            max_concurrent_trials=8,  # the 4-CPU node holds two trials of 2 CPUs
            stop={"training_iteration": 1},
            resources={"cpu": 2},
            name="big",
        )
    assert few.actors_at_setup == 2
    assert big.actors_at_setup == 2


async def test_without_reuse_a_sweep_starts_no_workers_ahead(
    tmp_path: Path, fake_ray: FakeRay, orchestrator: MakeOrchestrator
) -> None:
    searcher = WatchedSearch(fake_ray)
    async with orchestrator(storage=tmp_path, name="cold") as orch:
        await orch.sweep(
            FakeObjective,
            space(tmp_path),
            num_samples=2,
            searcher=searcher,
            max_concurrent_trials=2,
            stop={"training_iteration": 1},
            resources=CPU,
            reuse_actors=False,
        )
    assert searcher.actors_at_setup == 0


def fails_or_waits_for_the_failure(config: dict[str, Any]) -> None:
    """Trial x=0 fails once the others run; they report only once the driver has handled
    that failure (its hook wrote the mark): any result of theirs comes after it."""
    from orchestrator import report

    marks = Path(config["marks"])

    def wait_for(*names: str) -> None:
        for _ in range(1200):
            if all((marks / name).exists() for name in names):
                return
            time.sleep(0.05)

    if config["x"] == 0:
        wait_for("running-1", "running-2")
        raise ValueError("the first trial fails")
    (marks / f"running-{config['x']}").touch()
    wait_for("failed")
    for step in range(1000):
        report({"step": step})
        time.sleep(0.01)


class MarksErrors:
    def __init__(self, marks: Path) -> None:
        self.marks = marks

    def on_trial_error(self, trial: Trial, error: BaseException) -> None:
        (self.marks / "failed").touch()


async def test_fail_fast_stops_the_others_before_they_record_anything(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    """fail_fast: the first trial in ERROR ends the sweep on the loop, and the other
    trials' steps in flight are dropped: none of them records a result after it (a plain
    end would let each finish its step, and record it)."""
    async with orchestrator(storage=tmp_path, name="ff", hooks=[MarksErrors(tmp_path)]) as orch:
        result = await orch.sweep(
            fails_or_waits_for_the_failure,
            {"x": grid([0, 1, 2]), "marks": str(tmp_path)},
            resources=CPU,
            max_concurrent_trials=3,
            fail_fast=True,
        )
    states = Tally(t.state for t in result.trials)
    assert states[TrialState.ERROR] == 1 and states[TrialState.TERMINATED] == len(result.trials) - 1
    assert [t.results for t in result.trials] == [[]] * len(result.trials)
