"""Re-running a script with ``resume=True`` continues its experiment: each ``add_trial``
(before entering or inside) adopts its journaled trial, whose handle is the resumed
trial, and a ``sweep`` call continues its sweep; nothing is added twice. On the fake
Ray (moved from ``tests/test_resume_identity.py``: only the Ray under them changed)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Trial, TrialState
from orchestrator.errors import ConfigError
from orchestrator.search import RandomSearch, uniform

from ..support.fake_engine import MakeOrchestrator
from ..support.journal_files import head_trials
from ..support.trainables import Objective, Recorder, setups

CPU = {"cpu": 0.25}
SHORT: dict[str, Any] = {"stop": {"training_iteration": 3}, "checkpoint_every": 1, "resources": CPU}
"""The options of the trials that finish in the first run (all but the paused one)."""


def journaled_ids(storage: Path, name: str) -> list[str]:
    return [t["id"] for t in head_trials(storage / name)]


async def first_run(storage: Path, marks: Path, orchestrator: MakeOrchestrator) -> dict[str, Trial]:
    """Two trials of one config (generated ids), one named, one paused midway."""
    async with orchestrator(storage=storage, name="script", progress=False) as orch:
        first = orch.add_trial(Recorder, {"rate": 1, "marks": str(marks)}, **SHORT)
        twin = orch.add_trial(Recorder, {"rate": 1, "marks": str(marks)}, **SHORT)
        named = orch.add_trial(
            Recorder, {"rate": 2, "marks": str(marks)}, trial_id="named", **SHORT
        )
        paused = orch.add_trial(
            Recorder,
            {"rate": 3, "marks": str(marks), "delay": 0.05},
            stop={"training_iteration": 40},
            checkpoint_every=1,
            resources=CPU,
        )
        running = asyncio.create_task(orch.run())
        while paused.iteration < 2:
            await asyncio.sleep(0.05)
        await paused.pause()
        await running
    assert paused.state is TrialState.PAUSED
    assert all(t.state is TrialState.TERMINATED for t in (first, twin, named))
    return {"first": first, "twin": twin, "named": named, "paused": paused}


async def test_rerunning_the_script_with_resume_adopts_its_trials(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, orchestrator: MakeOrchestrator
) -> None:
    storage, marks = tmp_path / "runs", tmp_path / "marks"
    marks.mkdir()
    before = await first_run(storage, marks, orchestrator)
    paused_results = list(before["paused"].results)
    ran = setups(marks)

    orch = orchestrator(storage=storage, name="script", resume=True, progress=False)
    # Added before entering: adopted when the journal is read...
    first = orch.add_trial(Recorder, {"marks": str(marks), "rate": 1}, **SHORT)  # key order
    named = orch.add_trial(Recorder, {"rate": 2, "marks": str(marks)}, trial_id="named", **SHORT)
    with caplog.at_level(logging.WARNING, logger="orchestrator"):
        async with orch:
            assert first.id == before["first"].id and named.id == "named"
            # ...and inside, at the call.
            twin = orch.add_trial(Recorder, {"rate": 1, "marks": str(marks)}, **SHORT)
            paused = orch.add_trial(
                Recorder,
                {"rate": 3, "marks": str(marks), "delay": 0.05},
                stop={"training_iteration": 40},
                checkpoint_every=1,
                resources=CPU,
            )
            new = orch.add_trial(Recorder, {"rate": 4, "marks": str(marks)}, **SHORT)
            assert twin.id == before["twin"].id and paused.id == before["paused"].id
            assert new.id not in {t.id for t in before.values()}
            with pytest.raises(ConfigError, match="trial named: .*already adopted"):
                orch.add_trial(
                    Recorder, {"rate": 2, "marks": str(marks)}, trial_id="named", **SHORT
                )
            assert len(orch.trials) == 5
            # The handles are the resumed trials: their state, results, checkpoints.
            assert first.state is TrialState.TERMINATED and first.iteration == 3
            assert [r["training_iteration"] for r in first.results] == [1, 2, 3]
            assert paused.state is TrialState.PAUSED and paused.results == paused_results
            assert paused.latest_checkpoint is not None
            await orch.run()
            await paused.resume()
            await paused.wait()
    assert paused.state is TrialState.TERMINATED
    assert [r["training_iteration"] for r in paused.results] == list(range(1, 41))
    assert new.state is TrialState.TERMINATED
    after = setups(marks)
    for key in ("first", "twin", "named"):  # never set up again: nothing re-ran
        trial_id = before[key].id
        assert after[trial_id] == ran[trial_id] == "x", trial_id
    assert journaled_ids(storage, "script") == [*(t.id for t in before.values()), new.id]
    warned = [r.message for r in caplog.records if "matches no journaled trial" in r.message]
    assert len(warned) == 1 and f"trial {new.id} " in warned[0]


async def test_a_call_before_entering_has_its_final_id_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, orchestrator: MakeOrchestrator
) -> None:
    """The handle a call before entering returns never changes its id: the journal is
    read at the first such call, so an adopting call has the journaled trial's id at
    once and a new trial keeps its own (said once, at the call, not again on entering)."""
    storage, marks = tmp_path / "runs", tmp_path / "marks"
    marks.mkdir()
    before = await first_run(storage, marks, orchestrator)
    orch = orchestrator(storage=storage, name="script", resume=True, progress=False)
    with caplog.at_level(logging.WARNING, logger="orchestrator"):
        first = orch.add_trial(Recorder, {"rate": 1, "marks": str(marks)}, **SHORT)
        twin = orch.add_trial(Recorder, {"rate": 1, "marks": str(marks)}, **SHORT)
        new = orch.add_trial(Recorder, {"rate": 9, "marks": str(marks)}, **SHORT)
        ids = (first.id, twin.id, new.id)
        assert ids[:2] == (before["first"].id, before["twin"].id)  # before entering
        assert new.id not in journaled_ids(storage, "script")
        assert [t.id for t in orch.trials] == list(ids)
        said = caplog.text.count("matches no journaled trial")
        assert said == 1 and f"trial {new.id} " in caplog.text
        async with orch:
            assert (first.id, twin.id, new.id) == ids
            assert first.state is TrialState.TERMINATED and first.iteration == 3
            await orch.run()
    assert (first.id, twin.id, new.id) == ids
    assert new.state is TrialState.TERMINATED and twin.state is TrialState.TERMINATED
    assert caplog.text.count("matches no journaled trial") == 1
    assert journaled_ids(storage, "script") == [*(t.id for t in before.values()), new.id]


async def test_a_sweep_resumed_with_the_same_call_adds_no_trial(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    storage, marks = tmp_path / "runs", tmp_path / "marks"
    marks.mkdir()

    def call(trainable: Any = Objective) -> dict[str, Any]:
        return {
            "trainable": trainable,
            "space": {"x": uniform(-1, 1), "marks": str(marks)},
            "num_samples": 3,
            "metric": "loss",
            "mode": "min",
            "searcher": RandomSearch(seed=3),
            "stop": {"training_iteration": 2},
            "checkpoint_every": 1,
            "resources": CPU,
        }

    async with orchestrator(storage=storage, name="swept", progress=False) as orch:
        first = await orch.sweep(**call())
    ids = [t.id for t in first.trials]
    configs = [t.config["x"] for t in first.trials]
    async with orchestrator(storage=storage, name="swept", resume=True, progress=False) as orch:
        again = await orch.sweep(**call())
        assert [t.id for t in again.trials] == ids
        assert [t.config["x"] for t in again.trials] == configs
        assert all(t.state is TrialState.TERMINATED for t in again.trials)
        assert len(orch.trials) == 3
        with pytest.raises(
            ConfigError,
            match="sweep 'sweep': the journal holds this sweep with trainable "
            "tests.support.trainables:Objective",
        ):
            await orch.sweep(**call(Recorder))
        assert len(orch.trials) == 3
    assert set(setups(marks)) == set(ids) and set(setups(marks).values()) == {"x"}
    assert journaled_ids(storage, "swept") == ids
