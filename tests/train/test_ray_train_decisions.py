"""Decisions on distributed trials (Ray Train, 2 workers: ``tests/support/train_gang.py``), on
real Ray: ``pause()`` releases the gang (its placement group is removed) and
``resume()`` continues from the newest checkpoint; ``restore(ckpt)`` restarts the gang
from an older one; PBT's exploit restarts a trial's gang from its donor's checkpoint
with the explored config. Each decision lands on a report of rank 0, which the trial's
function is waiting at: the callback then removes the gang and has Train abort its run.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("ray.train.torch")

from orchestrator import Orchestrator, Trial, TrialState  # noqa: E402
from orchestrator.schedulers import PBT  # noqa: E402
from orchestrator.search import grid  # noqa: E402

from ..support.observe import wait_for  # noqa: E402
from ..support.train_gang import DRIVER, gang_trial, live_gangs, wait_gangs_released  # noqa: E402

#: Seconds for a whole test on a loaded 2-core machine (a Train run starts in 15-60 s).
TRAIN_TIMEOUT_S = 600

pytestmark = [pytest.mark.slow, pytest.mark.timeout(TRAIN_TIMEOUT_S)]


class PauseThenRollBack:
    """At rank 0's report of epoch 2: pause the trial (the test resumes it). At the
    first result after the resume: roll back to the checkpoint of epoch 1. Notes every
    result's (epoch, start) and the gangs alive at the first. (Queued hooks pace the
    trial, which runs at most two calls past them: a request lands near its result.)"""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []
        self.gangs_at_first: int | None = None
        self.paused = False
        self.restored = False

    async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
        epoch, start = result["epoch"], result["start"]
        self.seen.append((epoch, start))
        if self.gangs_at_first is None:
            self.gangs_at_first = len(await asyncio.to_thread(live_gangs))
        if epoch == 2 and not self.paused:
            self.paused = True
            await trial.pause()
        elif start > 1 and not self.restored:
            self.restored = True
            await trial.restore(next(c for c in trial.checkpoints if c.iteration == 1))


@pytest.mark.usefixtures("ray_local")
async def test_pause_releases_the_gang_and_resume_and_restore_restart_it(
    tmp_path: Path,
) -> None:
    script = PauseThenRollBack()
    config = {"epochs": 8, "train_storage": str(tmp_path / "train")}
    async with Orchestrator(storage=tmp_path / "runs", name="pause", hooks=[script]) as orch:
        trial = orch.add_trial(gang_trial, config, resources=DRIVER)
        runner = asyncio.create_task(orch.run())
        await wait_for(lambda: trial.state is TrialState.PAUSED, timeout=TRAIN_TIMEOUT_S - 200)
        assert script.gangs_at_first == 1
        await asyncio.to_thread(wait_gangs_released, 30)  # the pause released the gang
        paused_at = trial.iteration
        newest = trial.latest_checkpoint
        assert newest is not None and newest.iteration == paused_at  # one a report
        await runner  # run() returned: its one trial had settled, PAUSED
        await trial.resume()
        await asyncio.wait_for(orch.run(), timeout=TRAIN_TIMEOUT_S - 200)

    assert trial.state is TrialState.TERMINATED, trial.error
    assert trial.errors == [] and trial.num_failures == 0
    # Epochs 1..p, then from the checkpoint of p (k >= 1 of them before the rollback
    # landed), then from the checkpoint of epoch 1 to the end.
    seen, p = script.seen, paused_at
    k = sum(start == p for _, start in seen)
    assert k >= 1 and seen == (
        [(e, 0) for e in range(1, p + 1)]
        + [(e, p) for e in range(p + 1, p + k + 1)]
        + [(e, 1) for e in range(2, 9)]
    ), seen
    assert [r["epoch"] for r in trial.results] == list(range(1, 9))
    assert [r["training_iteration"] for r in trial.results] == list(range(1, 9))
    assert [r["start"] for r in trial.results] == [0] + [1] * 7
    assert trial.results[-1]["score"] == pytest.approx(0.8)  # the state went back too
    assert trial.discarded_results == p + k - 1
    await asyncio.to_thread(wait_gangs_released)


@pytest.mark.usefixtures("ray_local")
async def test_pbt_exploits_a_distributed_trial_from_its_donors_checkpoint(
    tmp_path: Path,
) -> None:
    """Two trials, lr 0.01 and 1.0 (score grows by lr an epoch); boundary at epoch 3.
    Holds make the exploit land there, once: the weak trial waits before its epoch 3
    until the strong one's checkpoint of epoch 3 is persisted, and the strong one waits
    at epoch 3 until the exploit is decided (so it is alive, and a donor, then)."""
    ready, go = str(tmp_path / "ready"), str(tmp_path / "go")
    scheduler = PBT(
        perturbation_interval=3,
        hyperparam_mutations={"lr": [0.01, 1.0, 2.0]},
        quantile_fraction=0.5,
        resample_probability=0.0,
        seed=1,
    )
    space = {
        "lr": grid([0.01, 1.0]),
        "epochs": 5,
        "holds": {"0.01": [2, ready], "1.0": [3, go]},
        "train_storage": str(tmp_path / "train"),
    }
    async with Orchestrator(storage=tmp_path / "runs", name="pbt") as orch:
        sweep = asyncio.create_task(
            orch.sweep(
                gang_trial,
                space,
                metric="score",
                mode="max",
                scheduler=scheduler,
                stop={"training_iteration": 5},
                resources=DRIVER,
                # A trial asking for no resource leaves the sweep no bound of its own.
                max_concurrent_trials=2,
            )
        )

        def strong() -> Trial | None:
            return next((t for t in orch.trials if t.config["lr"] == 1.0), None)

        def donor_saved() -> bool:
            trial = strong()
            return trial is not None and getattr(trial.latest_checkpoint, "iteration", 0) == 3

        await wait_for(donor_saved, timeout=TRAIN_TIMEOUT_S - 200)
        Path(ready).touch()
        await wait_for(lambda: bool(scheduler.lineage) or sweep.done(), timeout=300)
        Path(go).touch()
        result = await asyncio.wait_for(sweep, timeout=300)

    by_lr = {t.results[0]["lr"]: t for t in result.trials}
    weak, top = by_lr[0.01], by_lr[1.0]
    assert len(scheduler.lineage) == 1, scheduler.lineage
    (exploit,) = scheduler.lineage
    assert (exploit["trial_id"], exploit["donor_id"]) == (weak.id, top.id)
    assert exploit["time"] == 3 and exploit["donor_checkpoint_iteration"] == 3
    new_lr = exploit["new_config"]["lr"]
    assert new_lr in (0.01, 2.0) and weak.config["lr"] == new_lr
    for trial in (weak, top):
        assert trial.state is TrialState.TERMINATED and trial.num_failures == 0, trial.errors
        assert [r["training_iteration"] for r in trial.results] == [1, 2, 3, 4, 5]
        assert [r["epoch"] for r in trial.results] == [1, 2, 3, 4, 5]
    # From epoch 4 the weak trial is the strong one's state (3 epochs at 1.0) with the
    # explored lr, its gang restarted from the donor's checkpoint.
    assert [r["start"] for r in weak.results] == [0, 0, 0, 3, 3]
    assert [r["lr"] for r in weak.results] == [0.01] * 3 + [new_lr] * 2
    assert weak.results[4]["score"] == pytest.approx(3.0 + 2 * new_lr)
    assert [r["start"] for r in top.results] == [0] * 5
    await asyncio.to_thread(wait_gangs_released)
