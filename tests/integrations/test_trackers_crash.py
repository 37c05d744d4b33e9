"""The tracker hooks on real Ray, with the real MLflow (a sqlite store) and W&B
(offline), reading back what each stored: a trial whose actor is killed continues its
run; a driver SIGKILLed after the trackers stored its results, then resumed by a new
driver process, continues each run (same run id), with no step twice and the rollback
marked. The drivers join the session's Ray cluster (a private Ray per driver would cost
seconds each). The same semantics on the fake Ray, with a failure and a pause:
``tests/engine/test_trackers_run.py``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from orchestrator import Orchestrator, Trial, TrialState
from orchestrator.core.journal_format import JOURNAL_KEY
from orchestrator.integrations.mlflow import MLflowHook
from orchestrator.integrations.tracker import ROLLBACK_METRIC
from orchestrator.integrations.wandb import WandbHook, run_id_for

from ..support import REPO_ROOT
from ..support.journal_files import head_trials
from ..support.processes import end_tree
from ..support.trackers import StoredRun, read_mlflow, read_wandb, read_wandb_now
from ..support.trainables import Recorder, kill_worker

pytestmark = pytest.mark.usefixtures("ray_local")

ROOT = REPO_ROOT
CPU = {"cpu": 0.25}
#: The hooks' wait at the end, generous: on a loaded machine W&B's service takes
#: seconds to start and to finish runs.
GRACE = 120

DRIVER = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {root!r})
    from orchestrator import Orchestrator
    from orchestrator.integrations.mlflow import MLflowHook
    from orchestrator.integrations.wandb import WandbHook
    from tests.support.trainables import Counter

    async def main():
        hooks = [MLflowHook({uri!r}, experiment_name="crash", close_grace={grace}),
                 WandbHook("crash", group="g", dir={dir!r}, close_grace={grace})]
        async with Orchestrator(storage={storage!r}, name="exp", resume={resume!r},
                                ray_address={address!r}, progress=False,
                                journal_interval=0.2, hooks=hooks) as orch:
            orch.add_trial(Counter, {{"delay": 0.05, "hold_at": {hold_at},
                                     "fast_after": {fast!r}}},
                           trial_id="t", stop={{"training_iteration": {final}}},
                           checkpoint_every=4, resources={{"cpu": 0.25}})
            await orch.run()

    asyncio.run(main())
    """
)


@pytest.fixture
def wandb_offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """W&B offline and quiet (in this process and the drivers it starts); the service
    this process started is ended after the test."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    yield
    if "wandb" in sys.modules:
        sys.modules["wandb"].teardown()


def assert_each_step_once(run: StoredRun, final: int) -> None:
    assert run.steps("count") == list(range(1, final + 1)), run.steps("count")
    assert [value for _, value in run.metrics["count"]] == [float(i) for i in range(1, final + 1)]


def journaled_results(journal: Path) -> int:
    try:
        return int(head_trials(journal.parent)[0]["results_count"])
    except (OSError, ValueError, KeyError, IndexError):
        return 0  # not written yet (or being replaced: retry)


def stored_mlflow_step(uri: str) -> int:
    try:
        runs = read_mlflow(uri, "crash")
    except Exception:  # noqa: BLE001 - the store or the experiment is not made yet
        return 0
    return max(runs["t"].steps("count"), default=0) if "t" in runs else 0


def stored_wandb_step(directory: Path) -> int:
    runs, _ = read_wandb_now(directory)
    return max((max(r.steps("count"), default=0) for r in runs.values()), default=0)


async def wait_for(what: str, check: Callable[[], bool], proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 180
    while not check():
        assert proc.poll() is None, f"the driver exited before {what}"
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.1)


@pytest.mark.timeout(400)  # two driver processes, each starting W&B's service
@pytest.mark.usefixtures("wandb_offline")
async def test_a_driver_killed_and_resumed_continues_each_trials_runs(
    tmp_path: Path, ray_local: Any
) -> None:
    hold_at, final = 10, 16
    storage, fast, wandb_dir = tmp_path / "store", tmp_path / "fast", tmp_path / "wb"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def driver(resume: bool) -> subprocess.Popen[bytes]:
        script = DRIVER.format(
            root=str(ROOT), uri=uri, grace=GRACE, dir=str(wandb_dir), storage=str(storage),
            resume=resume, address=ray_local.address, hold_at=hold_at, fast=str(fast),
            final=final,
        )  # fmt: skip
        return subprocess.Popen([sys.executable, "-c", script], env=env, cwd=str(ROOT))

    # Made here: the test reading the store while the driver makes its tables would race.
    MlflowClient(uri).create_experiment("crash")
    first = driver(resume=False)
    journal = storage / "exp" / JOURNAL_KEY
    try:
        # The trial waits before its step 11 until ``fast`` exists: the driver cannot
        # finish it. The kill lands once the journal and both trackers hold step 10.
        await wait_for("10 results are journaled", lambda: journaled_results(journal) >= 10, first)
        await wait_for("MLflow stored step 10", lambda: stored_mlflow_step(uri) == 10, first)
        await wait_for("W&B wrote step 10", lambda: stored_wandb_step(wandb_dir) == 10, first)
    finally:
        await end_tree(first)  # SIGKILL, with W&B's service: nothing is ended or flushed
    assert first.returncode == -9
    before_mlflow = read_mlflow(uri, "crash")["t"]
    assert before_mlflow.status == "RUNNING"  # nobody ended it
    assert_each_step_once(before_mlflow, hold_at)
    killed, _ = read_wandb_now(wandb_dir)
    run_id = run_id_for("crash", "g", "t")
    assert list(killed) == [run_id] and killed[run_id].status == ""  # no exit record

    fast.touch()  # no more holding: the new driver finishes the trial
    second = driver(resume=True)
    try:
        assert await asyncio.to_thread(second.wait, 240) == 0
    finally:
        await end_tree(second)

    for run in (read_mlflow(uri, "crash")["t"], read_wandb(wandb_dir)[run_id]):
        assert run.status == "FINISHED" and run.name == "t"
        assert_each_step_once(run, final)
        # Resumed from the checkpoint of 8: 9 and 10, re-run, were not sent again, and
        # 11, the first new step, carries the mark.
        assert run.metrics[ROLLBACK_METRIC] == [(hold_at + 1, 8.0)]
    assert read_mlflow(uri, "crash")["t"].run_id == before_mlflow.run_id
    assert read_wandb(wandb_dir)[run_id].segments == 2  # one file per driver, one run


class KillOnce:
    """Kills the worker process of trial ``which`` once, on its result ``at``."""

    def __init__(self, which: str, at: int) -> None:
        self.which, self.at = which, at
        self.killed = False

    async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
        if trial.id == self.which and result["training_iteration"] == self.at:
            if not self.killed:
                self.killed = True
                kill_worker(result["pid"])


@pytest.mark.usefixtures("wandb_offline")
async def test_a_trial_whose_actor_is_killed_continues_its_runs(tmp_path: Path) -> None:
    final = 12
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    hooks = [
        MLflowHook(uri, experiment_name="crash", close_grace=GRACE),
        WandbHook("crash", group="g", dir=tmp_path, close_grace=GRACE),
    ]
    kill = KillOnce("t", at=6)
    async with Orchestrator(
        storage=tmp_path / "store", name="exp", max_failures=1, failure_backoff=0,
        progress=False, hooks=[*hooks, kill],
    ) as orch:  # fmt: skip
        trial = orch.add_trial(
            Recorder,
            {"delay": 0.1},
            trial_id="t",
            stop={"training_iteration": final},
            checkpoint_every=4,
            resources=CPU,
        )
        await orch.run()
    assert kill.killed and trial.num_failures == 1 and trial.state is TrialState.TERMINATED
    pids = {r["pid"] for r in trial.results}
    assert len(pids) == 2  # a new worker process after the kill
    for hook in hooks:
        stats = hook.statistics()
        assert stats.failures == 0 and stats.dropped == 0 and stats.replayed >= 1

    mlflow_run = read_mlflow(uri, "crash")["t"]
    wandb_run = read_wandb(tmp_path)[run_id_for("crash", "g", "t")]
    assert wandb_run.segments == 1  # the driver lived: one run, never reopened
    for run in (mlflow_run, wandb_run):
        assert run.status == "FINISHED"
        assert_each_step_once(run, final)
        # Back to a checkpoint (4, or 8 if the worker got that far before it died): the
        # first step past where the run was carries the mark.
        ((step, to),) = run.metrics[ROLLBACK_METRIC]
        assert to in (4.0, 8.0) and step > 6
