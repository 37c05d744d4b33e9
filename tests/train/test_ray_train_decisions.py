"""Decisions on distributed trials (Ray Train, 2 workers: ``tests/support/train_gang.py``), on
real Ray, in one PBT sweep: PBT's exploit restarts a trial's gang mid-run from its
donor's checkpoint with the explored config (a restore: ``trial.restore(ckpt, config=)``
is carried out as the same decision); ``pause()`` releases the donor's gang (its
placement group is removed) and ``resume()`` continues it from its newest checkpoint.
Each decision lands on a report of rank 0, which the trial's function is waiting at: the
callback then removes the gang and has Train abort its run.

One sweep for all three, as each Ray Train start costs tens of CPU-seconds: a restore to
an older checkpoint of the trial's own is the engine's (``tests/engine/test_loop.py``),
and what a gang adds to it (Train aborted, the gang restarted from the checkpoint) is
what the exploit shows.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("ray.train.torch")

from orchestrator import Orchestrator, Trial, TrialState  # noqa: E402
from orchestrator.schedulers import PBT  # noqa: E402
from orchestrator.search import grid  # noqa: E402

from ..support.observe import wait_for  # noqa: E402
from ..support.train_gang import (  # noqa: E402
    DRIVER,
    gang_trial,
    held,
    live_gangs,
    wait_gangs_released,
)

#: Seconds for a whole test on a loaded 2-core machine (a Train run starts in 15-60 s).
TRAIN_TIMEOUT_S = 600

pytestmark = [pytest.mark.slow, pytest.mark.timeout(TRAIN_TIMEOUT_S)]


def wait_removed(gangs: set[str], timeout: float) -> None:
    """The placement groups ``gangs`` (ids) are removed (others may live)."""
    deadline = time.monotonic() + timeout
    while alive := gangs & {g["placement_group_id"] for g in live_gangs()}:
        assert time.monotonic() < deadline, alive
        time.sleep(0.2)


@pytest.mark.usefixtures("ray_local")
async def test_pbt_exploits_a_distributed_trial_from_its_donors_checkpoint(
    tmp_path: Path,
) -> None:
    """Two trials, lr 0.01 and 1.0 (score grows by lr an epoch); boundary at epoch 3.
    Holds make the exploit land there, once: the weak trial waits before its epoch 3
    until the strong one's checkpoint of epoch 3 is persisted, and the strong one waits
    at epoch 3 until the exploit is decided (so it is alive, and a donor, then). The
    strong one is paused while it waits: the pause lands on its next report, epoch 4's,
    and releases its gang; resumed (while the weak one's restarted gang runs), it runs
    epoch 5 from its checkpoint."""
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
        # Both gangs wait (the weak one before its epoch 3, the strong one before its 4):
        # the exploit removes the weak one's, the pause below the strong one's.
        await wait_for(lambda: held(ready) == 2, timeout=TRAIN_TIMEOUT_S - 200)
        first = {g["placement_group_id"] for g in await asyncio.to_thread(live_gangs)}
        assert len(first) == 2, first
        Path(ready).touch()
        await wait_for(lambda: bool(scheduler.lineage) or sweep.done(), timeout=300)
        top = strong()
        assert top is not None
        pausing = asyncio.create_task(top.pause())  # held before epoch 4: lands at its report
        Path(go).touch()
        await asyncio.wait_for(pausing, timeout=300)
        assert top.state is TrialState.PAUSED and top.iteration == 4, top.results
        newest = top.latest_checkpoint
        assert newest is not None and newest.iteration == 4  # the report's own
        await asyncio.to_thread(wait_removed, first, 30)  # the pause released its gang
        await top.resume()  # while the weak one's restarted gang runs
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
    # The strong one went on from its checkpoint of epoch 4 (its state with it).
    assert [r["start"] for r in top.results] == [0, 0, 0, 0, 4]
    assert top.results[4]["score"] == pytest.approx(5.0)
    assert top.discarded_results == 0
    await asyncio.to_thread(wait_gangs_released)
