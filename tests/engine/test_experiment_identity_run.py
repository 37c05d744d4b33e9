"""An experiment is never silently replaced, and resuming one that does not exist is an
error that creates nothing. On the fake Ray (moved from
``tests/test_experiment_identity.py``: only the Ray under them changed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator import TrialState
from orchestrator.core.journal_format import JOURNAL_KEY
from orchestrator.core.lease_record import LEASE_KEY
from orchestrator.errors import ConfigError, ExperimentExists, ExperimentNotFound

from ..support.fake_engine import MakeOrchestrator
from ..support.observe import snapshot
from ..support.trainables import Counter


async def run_two_trials(
    storage: Path, orchestrator: MakeOrchestrator, **options: object
) -> list[str]:
    async with orchestrator(storage=storage, name="exp", keep_checkpoints=2, **options) as orch:
        trials = [
            orch.add_trial(
                Counter,
                stop={"training_iteration": 6},
                checkpoint_every=2,
                resources={"cpu": 0.25},
                trial_id=f"same{i}",
            )
            for i in range(2)
        ]
        await orch.run()
    assert all(t.state is TrialState.TERMINATED for t in trials)
    return [t.id for t in trials]


async def test_an_existing_experiment_is_refused_and_left_intact(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    await run_two_trials(tmp_path, orchestrator)
    before = snapshot(tmp_path / "exp")
    assert JOURNAL_KEY in before and any("checkpoint_000006" in k for k in before)
    with pytest.raises(ExperimentExists) as caught:
        async with orchestrator(storage=tmp_path, name="exp"):
            pass
    message = str(caught.value)
    assert str(tmp_path / "exp") in message and "2 trial(s)" in message
    assert "last updated 20" in message
    assert "resume=True" in message and "overwrite=True" in message
    assert snapshot(tmp_path / "exp") == before  # byte for byte


async def test_overwrite_deletes_the_old_experiment_completely(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    await run_two_trials(tmp_path, orchestrator)
    old = snapshot(tmp_path / "exp")
    async with orchestrator(storage=tmp_path, name="exp", overwrite=True) as orch:
        # Entered: the old experiment is gone before anything new is written to it,
        # but for the lease this driver holds on it.
        left = {
            k
            for k in snapshot(tmp_path / "exp")
            if not k.startswith(JOURNAL_KEY) and LEASE_KEY not in k
        }
        assert left == set()
        orch.add_trial(Counter, stop={"training_iteration": 2}, resources={"cpu": 0.25})
        await orch.run()
    new = snapshot(tmp_path / "exp")
    assert not any(k.startswith(("same0", "same1")) for k in new)
    old_segments = {k for k in old if k.startswith("experiment_state.results")}
    assert not old_segments & set(new)


async def test_resuming_a_missing_experiment_is_an_error_and_creates_nothing(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    storage = tmp_path / "not-yet"
    with pytest.raises(ExperimentNotFound) as caught:
        async with orchestrator(storage=storage, name="nope", resume=True):
            pass
    assert "nothing to resume" in str(caught.value) and str(storage / "nope") in str(caught.value)
    assert not storage.exists()


def test_resume_and_overwrite_together_are_refused(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    with pytest.raises(ConfigError, match="pass one of them"):
        orchestrator(storage=tmp_path, name="x", resume=True, overwrite=True)
