"""The orchestrator end to end on the fake Ray: the engine's logic (runs to a stop,
retention, buffering, rollbacks, pause/resume, failures and their budget, hooks, trials
added during a run) through the public API, in milliseconds per trial.

These tests were real-Ray tests (``tests/api/test_orchestrator.py``); only the Ray under
them changed. The wiring to Ray itself is proved there (a real actor killed and
restored through its node's uploader, a script's ``run_sync``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from orchestrator import (
    Checkpoint,
    ConfigError,
    NoCheckpointError,
    Orchestrator,
    Trial,
    TrialError,
    TrialState,
)
from storage import MANIFEST_NAME

from ..support.fake_engine import MakeOrchestrator, iterations
from ..support.fakeray import FakeRay
from ..support.observe import committed
from ..support.trainables import (
    AsyncCounter,
    BadLoad,
    BadSetup,
    BadStep,
    Counter,
    NotATrainable,
    SeesItsCheckpoints,
    assert_failure_free_history,
)

CPU = {"cpu": 0.25}


async def test_trials_run_to_stop_with_checkpoints_and_retention(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="basic", keep_checkpoints=2) as orch:
        trials = [
            orch.add_trial(
                Counter,
                {"i": i},
                stop={"training_iteration": 20},
                checkpoint_every=5,
                resources=CPU,
            )
            for i in range(3)
        ]
        done = await orch.run()
        assert done == trials
        await asyncio.sleep(0.5)  # let the background GC finish its deletes
        stats = orch.statistics()
    root = tmp_path / "basic"
    for trial in trials:
        assert trial.state is TrialState.TERMINATED
        assert_failure_free_history(trial)
        assert trial.last_result is not None
        assert trial.last_result["training_iteration"] == 20
        assert trial.last_result["trial_id"] == trial.id
        assert [c.iteration for c in trial.checkpoints] == [15, 20]
        ckpt = trial.checkpoints[-1]
        assert ckpt.path is not None and ckpt.uri == "file://" + ckpt.path
        assert ckpt.metrics["training_iteration"] == 20
        # what is on disk, read without the driver: exactly the two kept checkpoints
        assert committed(root, trial) == ["checkpoint_000015", "checkpoint_000020"]
        state = json.loads((Path(ckpt.path) / "state.json").read_text())
        assert state == {"count": 20}
        assert trial.actor is None
    assert stats.trials == {"TERMINATED": 3}
    assert stats.loop.results == 60


async def test_small_local_checkpoints_are_committed_by_the_trial_itself(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    """With local storage, a trial's actor commits a checkpoint of a few small files
    itself; its node's persister starts only once a larger checkpoint needs it."""
    async with orchestrator(storage=tmp_path, name="inplace", keep_checkpoints=2) as orch:
        persisters = orch._dispatcher.executor.persisters  # type: ignore[union-attr]
        small = orch.add_trial(
            Counter, stop={"training_iteration": 20}, checkpoint_every=5, resources=CPU
        )
        await orch.run()
        assert persisters._by_node == {}
        large = orch.add_trial(
            Counter,
            {"padding_files": 9},
            stop={"training_iteration": 20},
            checkpoint_every=5,
            resources=CPU,
        )
        await orch.run()
        assert len(persisters._by_node) == 1
        await asyncio.sleep(0.5)  # let the background GC finish its deletes
    for trial, files in ((small, 1), (large, 10)):
        assert trial.state is TrialState.TERMINATED, trial.error
        assert_failure_free_history(trial, 20)
        assert committed(tmp_path / "inplace", trial) == ["checkpoint_000015", "checkpoint_000020"]
        manifest = json.loads((Path(trial.checkpoints[-1].path or "") / MANIFEST_NAME).read_text())
        assert len(manifest["files"]) == files


async def test_killed_actor_recovers_from_newest_checkpoint(
    tmp_path: Path, fake_ray: FakeRay, orchestrator: MakeOrchestrator
) -> None:
    class Killer:
        target = ""
        killed = False

        async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
            if trial.id == self.target and result["training_iteration"] == 8 and not self.killed:
                self.killed = True
                fake_ray.kill(trial.actor)

    killer = Killer()
    async with orchestrator(storage=tmp_path, name="kill", max_failures=1, hooks=[killer]) as orch:
        trial = orch.add_trial(
            Counter,
            {"delay": 0.01},
            stop={"training_iteration": 25},
            checkpoint_every=3,
            resources=CPU,
        )
        killer.target = trial.id
        bystander = orch.add_trial(Counter, stop={"training_iteration": 25}, resources=CPU)
        await orch.run()
    assert trial.state is TrialState.TERMINATED
    assert trial.num_failures == 1
    assert_failure_free_history(trial)
    assert bystander.state is TrialState.TERMINATED and bystander.num_failures == 0


@pytest.mark.parametrize("pending", [0, None])
async def test_max_pending_saves_bounds_how_far_training_runs_ahead_of_uploads(
    tmp_path: Path,
    pending: int | None,
    orchestrator: MakeOrchestrator,
) -> None:
    """With 10-file checkpoints the node's persister uploads each one while the trial
    trains on; ``max_pending_saves=0`` makes every step wait for the previous
    checkpoint's commit. The default lets training run ahead (which is what the first
    case would see without the bound)."""
    options = {} if pending is None else {"max_pending_saves": pending}
    async with orchestrator(storage=tmp_path, name="lag", **options) as orch:
        trial = orch.add_trial(
            SeesItsCheckpoints,
            {"padding_files": 9, "trial_dir": str(tmp_path / "lag" / "t")},
            stop={"training_iteration": 12},
            checkpoint_every=1,
            resources=CPU,
            trial_id="t",
        )
        await orch.run()
    assert trial.state is TrialState.TERMINATED, trial.error
    assert_failure_free_history(trial, 12)
    ahead = [r["training_iteration"] for r in trial.results if not r["previous_committed"]]
    if pending == 0:
        assert ahead == []
    else:
        assert ahead  # the persister's uploads take longer than a trivial step


async def test_callable_stop_and_async_trainable(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    seen: list[str] = []

    def stop(trial_id: str, result: dict[str, Any]) -> bool:
        seen.append(trial_id)
        return bool(result["count"] >= 7)

    async with orchestrator(storage=tmp_path, name="cb") as orch:
        trial = orch.add_trial(AsyncCounter, stop=stop, resources=CPU)
        await orch.run()
    assert trial.state is TrialState.TERMINATED
    assert iterations(trial) == list(range(1, 8))
    assert set(seen) == {trial.id}


async def test_result_buffer_is_exact_on_stop_and_checkpoints(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="buf", result_buffer=8) as orch:
        a = orch.add_trial(
            Counter, stop={"training_iteration": 23}, checkpoint_every=5, resources=CPU
        )
        b = orch.add_trial(Counter, stop={"count": 11}, resources=CPU)
        await orch.run()
    assert iterations(a) == list(range(1, 24))
    assert [c.iteration for c in a.checkpoints] == [5, 10, 15, 20, 23]
    assert iterations(b) == list(range(1, 12))  # never ran past the metric stop


async def test_restore_mid_run_from_a_hook_rolls_back(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    restored: list[Checkpoint] = []

    class RollBackOnce:
        async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
            if result["training_iteration"] == 12 and not restored:
                # Uploads run beside training (the first one also waits for the node's
                # uploader to start): wait until the checkpoint of iteration 5 is there.
                while not any(c.iteration == 5 for c in trial.checkpoints):
                    await asyncio.sleep(0.02)
                target = next(c for c in trial.checkpoints if c.iteration == 5)
                restored.append(await trial.restore(target))

        def on_trial_restore(self, trial: Trial, checkpoint: Checkpoint) -> None:
            restored.append(checkpoint)

    async with orchestrator(storage=tmp_path, name="rb", hooks=[RollBackOnce()]) as orch:
        trial = orch.add_trial(
            Counter,
            {"delay": 0.01},
            stop={"training_iteration": 30},
            checkpoint_every=5,
            resources=CPU,
        )
        await orch.run()
    assert trial.state is TrialState.TERMINATED
    assert [c.iteration for c in restored] == [5, 5]
    assert_failure_free_history(trial)  # results after 5 were dropped, then continued at 6
    assert trial.discarded_results > 0
    assert trial.last_result is not None and trial.last_result["count"] == 30


async def test_pause_resume_stop(tmp_path: Path, orchestrator: MakeOrchestrator) -> None:
    async with orchestrator(storage=tmp_path, name="prs") as orch:
        trial = orch.add_trial(Counter, {"delay": 0.02}, resources=CPU)
        other = orch.add_trial(Counter, stop={"training_iteration": 10}, resources=CPU)
        runner = asyncio.create_task(orch.run())
        while trial.iteration < 5:
            await asyncio.sleep(0.02)
        await trial.pause()
        assert trial.state is TrialState.PAUSED
        assert trial.actor is None
        paused_at = trial.iteration
        assert [c.iteration for c in trial.checkpoints] == [paused_at]
        await asyncio.sleep(0.2)
        assert trial.iteration == paused_at  # nothing trains while paused
        await trial.resume()
        assert trial.state is TrialState.RUNNING
        while trial.iteration < paused_at + 5:
            await asyncio.sleep(0.02)
        await trial.stop()
        assert trial.state is TrialState.TERMINATED
        await runner
    assert_failure_free_history(trial)
    assert other.state is TrialState.TERMINATED


async def test_requests_outside_the_context_are_refused(tmp_path: Path) -> None:
    orch = Orchestrator(storage=tmp_path, name="outside")
    trial = orch.add_trial(Counter, resources=CPU)
    with pytest.raises(NoCheckpointError, match=trial.id):
        await trial.restore()
    with pytest.raises(Exception, match="running orchestrator"):
        await trial.pause()


async def test_failures_past_the_budget_end_in_error_and_spare_others(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    errors: list[tuple[str, BaseException]] = []

    class Errors:
        def on_trial_error(self, trial: Trial, error: BaseException) -> None:
            errors.append((trial.id, error))

    async with orchestrator(storage=tmp_path, name="err", hooks=[Errors()]) as orch:
        bad = orch.add_trial(
            Counter, {"fail_at": 3}, stop={"training_iteration": 10}, resources=CPU
        )
        good = orch.add_trial(Counter, stop={"training_iteration": 10}, resources=CPU)
        await orch.run()
    assert bad.state is TrialState.ERROR
    assert isinstance(bad.error, TrialError)
    assert bad.id in str(bad.error) and "planned failure at 3" in str(bad.error)
    assert "step()" in str(bad.error)
    assert [tid for tid, _ in errors] == [bad.id]
    assert good.state is TrialState.TERMINATED and iterations(good) == list(range(1, 11))


async def test_step_error_is_retried_from_checkpoint_within_budget(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="retry", max_failures=2) as orch:
        trial = orch.add_trial(
            Counter,
            {"fail_at": 7},
            stop={"training_iteration": 12},
            checkpoint_every=5,
            resources=CPU,
        )
        await orch.run()
    # fails at 7, restores 5, counts 6 again, then fails at... count 7 again (deterministic)
    assert trial.state is TrialState.ERROR
    assert trial.num_failures == 3


@pytest.mark.parametrize(
    ("cls", "config", "message"),
    [
        (BadStep, {}, "must return a dict of metrics, got int"),
        (BadSetup, {}, "setup refuses this config"),
    ],
)
async def test_bad_trainables_error_with_trial_and_cause(
    tmp_path: Path,
    cls: type,
    config: dict[str, Any],
    message: str,
    orchestrator: MakeOrchestrator,
) -> None:
    async with orchestrator(storage=tmp_path, name="bad") as orch:
        bad = orch.add_trial(cls, config, stop={"training_iteration": 3}, resources=CPU)
        good = orch.add_trial(Counter, stop={"training_iteration": 3}, resources=CPU)
        await orch.run()
    assert bad.state is TrialState.ERROR
    assert bad.id in str(bad.error) and message in str(bad.error)
    assert good.state is TrialState.TERMINATED


async def test_failing_load_checkpoint_is_a_clear_error(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="badload") as orch:
        trial = orch.add_trial(
            BadLoad, stop={"training_iteration": 4}, checkpoint_every=2, resources=CPU
        )
        await orch.run()
        assert trial.state is TrialState.TERMINATED
        with pytest.raises(TrialError, match="cannot read checkpoint"):
            await trial.restore()
    assert trial.state is TrialState.ERROR
    assert "load_checkpoint()" in str(trial.error)


def test_bad_arguments_are_clear_errors(tmp_path: Path) -> None:
    orch = Orchestrator(storage=tmp_path, name="args")
    with pytest.raises(ConfigError, match="NotATrainable is neither a subclass"):
        orch.add_trial(NotATrainable)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="stop keys must be metric names"):
        orch.add_trial(Counter, stop={1: 3})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="stop threshold"):
        orch.add_trial(Counter, stop={"loss": "low"})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="checkpoint_every must be >= 0"):
        orch.add_trial(Counter, checkpoint_every=-1)
    with pytest.raises(ConfigError, match="resource 'cpu'"):
        orch.add_trial(Counter, resources={"cpu": -1})
    with pytest.raises(ConfigError, match="unknown storage scheme 'ftp'"):
        Orchestrator(storage="ftp://host/x")
    with pytest.raises(ConfigError, match="max_failures"):
        Orchestrator(storage=tmp_path, max_failures=-2)
    with pytest.raises(ConfigError, match="keep_checkpoints"):
        Orchestrator(storage=tmp_path, keep_checkpoints=0)
    with pytest.raises(ConfigError, match="max_pending_saves must be an int >= 0"):
        Orchestrator(storage=tmp_path, max_pending_saves=-1)
    assert orch.trials == []  # nothing half-added


async def test_hooks_see_each_trials_events_in_order(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    log_: dict[str, list[str]] = {}
    ended: list[int] = []

    class Recorder:
        async def on_trial_start(self, trial: Trial) -> None:
            log_.setdefault(trial.id, []).append("start")

        async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
            await asyncio.sleep(0.001 * (hash(trial.id) % 3))
            log_[trial.id].append(f"r{result['training_iteration']}")

        def on_checkpoint(self, trial: Trial, checkpoint: Checkpoint) -> None:
            log_[trial.id].append(f"c{checkpoint.iteration}")

        def on_trial_complete(self, trial: Trial) -> None:
            log_[trial.id].append("end")

        def on_experiment_end(self, trials: list[Trial]) -> None:
            ended.append(len(trials))

    async with orchestrator(storage=tmp_path, name="hooks", hooks=[Recorder()]) as orch:
        trials = [
            orch.add_trial(
                Counter, stop={"training_iteration": 6}, checkpoint_every=3, resources=CPU
            )
            for _ in range(3)
        ]
        await orch.run()
    for trial in trials:
        events = log_[trial.id]
        assert events[0] == "start" and events[-1] == "end"
        assert [e for e in events if e.startswith("r")] == [f"r{i}" for i in range(1, 7)]
        # a save is pipelined with the next step, so c3 may come after r4, never before r3
        assert events.index("c3") > events.index("r3")
        assert events.index("c6") > events.index("r6")
    assert ended == [3]


async def test_failing_and_slow_hooks_never_stall_or_kill(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    orchestrator: MakeOrchestrator,
) -> None:
    """The first trial's start hook blocks until the *other* trial completes: that can
    only happen if a blocked hook stalls neither the loop nor other trials' hooks."""
    slow_id: list[str] = []
    other_done = asyncio.Event()

    class Bad:
        def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
            if result["training_iteration"] == 2:
                raise KeyError("hook bug")

    class Slow:
        async def on_trial_start(self, trial: Trial) -> None:
            if not slow_id:
                slow_id.append(trial.id)
                await asyncio.wait_for(other_done.wait(), timeout=60)
                await asyncio.sleep(0.3)

        def on_trial_complete(self, trial: Trial) -> None:
            if trial.id != slow_id[0]:
                loop.call_soon_threadsafe(other_done.set)

    loop = asyncio.get_running_loop()
    caplog.set_level(logging.WARNING, logger="orchestrator.engine.hooks")
    async with orchestrator(
        storage=tmp_path, name="slow", hooks=[Bad(), Slow()], hook_slow_after=0.2
    ) as orch:
        trials = [
            orch.add_trial(Counter, stop={"training_iteration": 5}, resources=CPU) for _ in range(2)
        ]
        await orch.run()
    assert all(t.state is TrialState.TERMINATED for t in trials)
    assert other_done.is_set()
    text = caplog.text
    assert "hook Bad.on_trial_result failed" in text and "KeyError" in text
    assert f"hook Slow.on_trial_start for {slow_id[0]} has run for more than 0.2 s" in text


async def test_add_trial_during_run_from_a_task(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="add2") as orch:
        first = orch.add_trial(
            Counter, {"delay": 0.01}, stop={"training_iteration": 20}, resources=CPU
        )
        runner = asyncio.create_task(orch.run())
        while first.iteration < 3:
            await asyncio.sleep(0.01)
        late = orch.add_trial(Counter, stop={"training_iteration": 30}, resources=CPU)
        trials = await runner
    assert late in trials and late.state is TrialState.TERMINATED
    assert iterations(late) == list(range(1, 31))


async def test_trials_added_after_run_wait_for_the_next_run(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    orchestrator: MakeOrchestrator,
) -> None:
    """Between two run() calls a new trial stays PENDING; the next run() starts it once
    (the loop refuses no event: a second start would be logged as refused)."""
    async with orchestrator(storage=tmp_path, name="again") as orch:
        orch.add_trial(Counter, stop={"training_iteration": 3}, resources=CPU)
        await orch.run()
        later = orch.add_trial(Counter, stop={"training_iteration": 5}, resources=CPU)
        await asyncio.sleep(0.3)
        assert later.state is TrialState.PENDING
        with caplog.at_level(logging.ERROR, logger="orchestrator.engine.loop"):
            await orch.run()
    assert later.state is TrialState.TERMINATED
    assert iterations(later) == [1, 2, 3, 4, 5]
    assert "refused" not in caplog.text


async def test_restore_a_checkpoint_of_another_trial(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    async with orchestrator(storage=tmp_path, name="clone") as orch:
        donor = orch.add_trial(
            Counter, stop={"training_iteration": 10}, checkpoint_every=10, resources=CPU
        )
        await orch.run()
        clone = orch.add_trial(Counter, stop={"training_iteration": 15}, resources=CPU)
        await clone.restore(donor.checkpoints[-1])
        await clone.wait()
    assert clone.state is TrialState.TERMINATED
    assert iterations(clone) == [11, 12, 13, 14, 15]
    assert clone.last_result is not None and clone.last_result["count"] == 15


async def test_default_storage_is_a_local_results_dir(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    orchestrator: MakeOrchestrator,
) -> None:
    monkeypatch.setenv("TRIALFLOW_RESULTS_DIR", str(tmp_path / "results"))
    async with orchestrator(name="dflt") as orch:
        trial = orch.add_trial(
            Counter, stop={"training_iteration": 2}, checkpoint_every=2, resources=CPU
        )
        await orch.run()
    ckpt = trial.checkpoints[-1]
    assert ckpt.path is not None
    assert ckpt.path.startswith(os.path.join(str(tmp_path), "results", "dflt", trial.id))


async def test_unschedulable_trial_never_delays_the_others(
    tmp_path: Path, fake_ray: FakeRay, orchestrator: MakeOrchestrator
) -> None:
    """A trial waiting for a resource no node has yet: the others keep reporting; once
    a node with it joins, the waiting trial runs too."""
    async with orchestrator(storage=tmp_path, name="wait") as orch:
        waiting = orch.add_trial(
            Counter, stop={"training_iteration": 5}, resources={"cpu": 0.25, "special": 1}
        )
        others = [
            orch.add_trial(
                Counter, {"delay": 0.005}, stop={"training_iteration": 100}, resources=CPU
            )
            for _ in range(2)
        ]
        runner = asyncio.create_task(orch.run())
        while not all(t.state is TrialState.TERMINATED for t in others):
            await asyncio.sleep(0.05)
        assert waiting.state is TrialState.STARTING and waiting.results == []
        node = fake_ray.add_node("special", {"CPU": 1.0, "special": 1.0})
        await asyncio.wait_for(runner, timeout=60)
    assert waiting.state is TrialState.TERMINATED
    assert waiting.node_id == node.node_id
    assert all(iterations(t) == list(range(1, 101)) for t in others)


class JudgeStopsAt:
    """A stub judge (what a scheduler is to the machine): Stop at iteration ``at``,
    declared as its decision point."""

    def __init__(self, at: int) -> None:
        self.at = at

    def judge(self, result: dict[str, Any]) -> Any:
        from orchestrator.core.decisions import Stop

        return Stop(result["trial_id"]) if result["training_iteration"] >= self.at else None

    def next_decision_at(self, iteration: int) -> int | None:
        return self.at if iteration < self.at else None


async def test_a_judge_ends_a_buffered_trial_exactly_at_its_decision_point(
    tmp_path: Path,
    orchestrator: MakeOrchestrator,
) -> None:
    async with orchestrator(storage=tmp_path, name="judge", result_buffer=10) as orch:
        spec = orch.trial_spec(Counter, stop={"training_iteration": 50}, resources=CPU)
        trial = orch._exp.add(spec, judge=JudgeStopsAt(3)).handle
        await orch.run()
    assert trial.state is TrialState.TERMINATED
    assert [r["training_iteration"] for r in trial.results] == [1, 2, 3]
