"""A finished trial's record becomes a tombstone (issue 36, item 3; ``engine/tombstone.py``).

Once a committed journal write holds an ended trial, its spec, machine, config and
events leave the driver's memory for the journal's spill file. Everything that reads a
finished trial reads it without bringing them back, and a trial that comes back (a
restore of an ended trial, a clone of its checkpoint) is rebuilt exactly as it was.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, TrialState
from orchestrator.core.judge import Judges
from orchestrator.engine.tombstone import Sealer
from orchestrator.engine.trial_runtime import TrialRuntime
from orchestrator.journal import retirement
from orchestrator.journal.spill import SpillFile, SpillRef
from orchestrator.search import choice
from orchestrator.sweeps.scheduler_judge import info_of

from ..support.fake_engine import MakeOrchestrator, MakeRuntime, iterations
from ..support.journal_files import head_trials
from ..support.trainables import Counter

CPU = {"cpu": 0.25}


def _runtimes(orch: Orchestrator) -> list[TrialRuntime]:
    return list(orch._exp.trials.values())


async def _all_sealed(orch: Orchestrator) -> None:
    """Journal writes until every trial is sealed: an ended trial is sealed after the
    first write once its actor is released, which the loop does after it ends."""
    journal = orch._exp.journal
    assert journal is not None
    deadline = time.monotonic() + 60
    while not all(rt.sealed for rt in _runtimes(orch)):
        assert time.monotonic() < deadline, "timed out waiting for the trials to be sealed"
        await journal.flush()
        await asyncio.sleep(0.01)


async def test_finished_trials_are_read_without_opening_their_tombstones(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="read", progress=False) as orch:
        result = await orch.sweep(
            Counter,
            {"x": choice([1, 2, 3])},
            num_samples=6,
            metric="score",
            mode="max",
            max_concurrent_trials=3,
            stop={"training_iteration": 3},
            checkpoint_every=2,
            resources=CPU,
            seed=1,
            name="s",
        )
        await _all_sealed(orch)
        runtimes = _runtimes(orch)
        for trial in result.trials:
            assert trial.state is TrialState.TERMINATED and trial.iteration == 3
            assert trial.config["x"] in (1, 2, 3)
            assert trial.trainable_cls is Counter  # the class itself, not a copy
            assert trial.resources == CPU
            assert trial.stop_condition({"training_iteration": 3})
            assert iterations(trial) == [1, 2, 3]
            assert trial.last_result is not None and trial.last_result["count"] == 3
            assert [c.iteration for c in trial.checkpoints] == [2, 3]  # a final save
            assert trial.latest_checkpoint == trial.checkpoints[-1]
            assert trial.error is None and trial.errors == [] and trial.num_failures == 0
            assert repr(trial) == f"Trial({trial.id}, TERMINATED, iteration=3)"
        assert result.best_trial is not None and result.best_config is not None
        assert len(result.dataframe()) == 6
        assert orch.statistics().trials == {"TERMINATED": 6}
        # a scheduler's snapshot reads the config and checkpoint only when asked
        for rt in runtimes:
            info = info_of(rt)
            assert (info.trial_id, info.state, info.iteration) == (rt.id, "TERMINATED", 3)
            assert info.last_result == rt.last_result
            assert info.config == rt.handle.config
            assert info.checkpoint == rt.handle.latest_checkpoint
        # the readers opened copies: the tombstones are still sealed
        assert all(rt.sealed for rt in runtimes)
        # and the journal lists them: their sealed parts went, from the spill, into
        # sealed objects the head lists (format 3)
        await orch._exp.journal.flush()  # type: ignore[union-attr]
        entries = head_trials(tmp_path / "read")
        assert [t["id"] for t in entries] == [t.id for t in result.trials]
        assert {(t["state"], t["results_count"]) for t in entries} == {("TERMINATED", 3)}


async def test_an_ended_trial_comes_back_as_it_was(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    """A restore of a sealed trial brings its parts back, exactly; a clone from a sealed
    trial's checkpoint reads it without doing so; both seal again once they end."""
    async with orchestrator(storage=tmp_path, name="back", progress=False) as orch:
        trial = orch.add_trial(
            Counter,
            {"delay": 0.0},
            stop={"training_iteration": 4},
            checkpoint_every=2,
            resources=CPU,
        )
        await orch.run()
        await _all_sealed(orch)
        (rt,) = _runtimes(orch)
        spec, checkpoints = rt.peek().spec, list(rt.peek().machine.checkpoints)
        assert spec.trainable is Counter and [c.iteration for c in checkpoints] == [2, 4]

        clone = orch.add_trial(Counter, stop={"training_iteration": 6}, resources=CPU)
        await clone.restore(trial.checkpoints[0])  # the donor is read, not brought back
        await clone.wait()
        assert iterations(clone) == [3, 4, 5, 6]
        assert rt.sealed

        await trial.restore(trial.checkpoints[0])  # the loop brings it back
        assert not rt.sealed
        assert rt.spec.to_json() == spec.to_json() and rt.spec.trainable is Counter
        await trial.wait()
        assert trial.state is TrialState.TERMINATED
        assert iterations(trial) == [1, 2, 3, 4] and trial.discarded_results == 2
        await _all_sealed(orch)
        assert trial.config == {"delay": 0.0} and iterations(trial) == [1, 2, 3, 4]
    # a resumed driver reads what the sealed trials' journal said
    async with orchestrator(storage=tmp_path, name="back", progress=False, resume=True) as orch:
        again = {t.id: t for t in orch.trials}
        assert iterations(again[trial.id]) == [1, 2, 3, 4]
        assert iterations(again[clone.id]) == [3, 4, 5, 6]
        assert again[trial.id].config == {"delay": 0.0}
        assert [c.iteration for c in again[trial.id].checkpoints] == [2, 4]


async def test_a_failed_trial_keeps_its_exceptions_themselves(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="err", progress=False) as orch:
        trial = orch.add_trial(Counter, {"fail_at": 2}, resources=CPU)
        await orch.run()
        await _all_sealed(orch)
        (rt,) = _runtimes(orch)
        assert trial.state is TrialState.ERROR
        error = trial.error
        assert error is not None and "planned failure at 2" in str(error)
        assert trial.error is error and trial.errors == [error]  # kept, not copied


def test_a_trial_whose_parts_do_not_pickle_stays_live(runtime: MakeRuntime) -> None:
    rt = runtime(Counter)
    rt.machine._state = TrialState.TERMINATED  # as if it ran
    sealer = Sealer(SpillFile())
    rt.config = {"gen": (i for i in range(3))}  # a generator does not pickle
    assert not rt.seal(sealer) and not rt.sealed
    rt.config = {"fn": lambda x: x}  # a function is kept by reference
    assert rt.seal(sealer) and rt.sealed
    fn = rt.peek().config["fn"]
    assert rt.peek().config["fn"] is fn and fn(3) == 3
    assert rt.config["fn"] is fn and not rt.sealed  # read by the loop: live again


def test_retiring_trials_spills_seals_and_gives_freed_memory_back_in_turn(
    runtime: MakeRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retirement, "TRIM_EVERY", 2)
    retiring = retirement.Retirement()
    trials = {}
    for _ in range(3):
        rt = runtime(Counter)
        rt.machine._state = TrialState.TERMINATED  # as if it ran
        rt.results = [{"training_iteration": 1}]
        trials[rt.id] = rt
    rows: dict[str, list[str] | SpillRef] = {t: ['{"training_iteration": 1}'] for t in trials}
    first, *rest = trials
    assert retiring.retire([first], trials, rows, dict.fromkeys(trials, 1)) == [first]
    assert isinstance(rows[first], SpillRef) and trials[first].sealed
    assert not retiring.trim_due()
    assert retiring.retire(rest, trials, rows, dict.fromkeys(trials, 1)) == rest
    assert retiring.trim_due() and not retiring.trim_due()  # counting starts again
    retirement.give_back_freed_memory()  # glibc's malloc_trim, or nothing
    assert [iterations(trials[t].handle) for t in trials] == [[1]] * 3


class _SweepJudge:
    """A judge of the experiment's (a sweep's scheduler): one object, never copied."""

    def judge(self, result: Any) -> None:
        return None

    def next_decision_at(self, iteration: int) -> int | None:
        return None


def test_a_sealed_trials_policy_is_pickled_and_comes_back_sharing_what_it_shared(
    runtime: MakeRuntime,
) -> None:
    """A finished trial's policy leaves memory with its record (issue 36: some 240 bytes
    a trial); what it shared with other trials or the experiment comes back the same
    object, its own parts equal."""

    def stopper(trial_id: str, result: Any) -> bool:
        return bool(result.get("done"))

    rt = runtime(Counter, stop=stopper, checkpoint_every=3)
    sweep_judge = _SweepJudge()
    policy = dataclasses.replace(
        rt.machine.policy,
        judge=Judges([rt.machine.policy.judge, sweep_judge]),
        required_metrics={"score": "the sweep's metric"},
    )
    rt.machine.policy = policy
    rt.machine._state = TrialState.TERMINATED  # as if it ran
    assert rt.seal(Sealer(SpillFile())) and rt.sealed
    assert policy not in gc.get_referents(rt._sealed)  # the tombstone keeps no policy

    opened = rt.peek().machine.policy  # a copy, to read
    back = rt.machine.policy  # live again
    assert not rt.sealed
    for copy in (opened, back):
        assert copy is not policy
        stop, judge = copy.judge.judges
        assert judge is sweep_judge and stop.stop.predicate is stopper
        assert stop.stop.trial_id == rt.id and stop.judge({"done": True}) is not None
        for shared in ("retention", "restart_backoff", "required_metrics", "hook_progress"):
            assert getattr(copy, shared) is getattr(policy, shared)
        assert copy.checkpoint_every == 3 and copy.max_failures == policy.max_failures
    assert back.judge.judges[0].stop is rt.spec.stop  # one criterion, as before sealing
