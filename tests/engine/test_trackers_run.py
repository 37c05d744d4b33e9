"""The tracker hooks (``orchestrator.integrations``) on the fake Ray, with the real
MLflow (a sqlite store) and W&B (offline), reading back what each stored: one run per
trial named after it, the config as params, one step per result; a trial that fails
once, or is paused and resumed, or whose driver is replaced, continues its run with no
step twice (the rollback marked); a tracker that never answers slows no trial."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from orchestrator import Trial, TrialState
from orchestrator.integrations.mlflow import MLflowHook
from orchestrator.integrations.tracker import ROLLBACK_METRIC, TrackerHook
from orchestrator.integrations.wandb import WandbHook, run_id_for

from ..support.fake_engine import MakeOrchestrator
from ..support.trackers import StoredRun, read_mlflow, read_wandb, silent_server
from .trainables import FakeRecorder

CPU = {"cpu": 0.25}
FINAL = 12
#: The hooks' wait at the end, generous: on a loaded machine W&B's service takes seconds
#: to start and to finish runs, and a test reads what was stored right after.
GRACE = 120
#: (trial id, the step it fails at once, its lr)
SETUPS = (("fails", 7, 0.1), ("paused", None, 0.2), ("plain", None, 0.3))


pytestmark = pytest.mark.usefixtures("wandb_offline")


Tracker = tuple[Callable[[], TrackerHook], Callable[[], dict[str, StoredRun]]]


def mlflow_tracker(root: Path) -> Tracker:
    uri = f"sqlite:///{root / 'mlflow.db'}"
    return (
        lambda: MLflowHook(uri, experiment_name="trackers", tags={"team": "a"}, close_grace=GRACE),
        lambda: read_mlflow(uri, "trackers"),
    )


def wandb_tracker(root: Path) -> Tracker:
    def read() -> dict[str, StoredRun]:
        by_id = read_wandb(root)
        trial_ids = {run_id_for("trackers", "g", t): t for t in ("fails", "paused", "plain", "t")}
        return {trial_ids[run_id]: run for run_id, run in by_id.items()}

    return lambda: WandbHook("trackers", group="g", dir=root, close_grace=GRACE), read


TRACKERS = {"mlflow": mlflow_tracker, "wandb": wandb_tracker}


class PauseOnce:
    """Pauses trial ``which`` at iteration 4 and resumes it."""

    def __init__(self, which: str) -> None:
        self.which = which
        self.done = False

    async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
        if trial.id == self.which and result["training_iteration"] >= 4 and not self.done:
            self.done = True
            await trial.pause()
            await trial.resume()


def assert_each_step_once(run: StoredRun, final: int) -> None:
    assert run.steps("count") == list(range(1, final + 1)), run.steps("count")
    assert [value for _, value in run.metrics["count"]] == [float(i) for i in range(1, final + 1)]


@pytest.mark.parametrize("name", TRACKERS)
async def test_one_run_per_trial_continued_through_a_failure_and_a_pause(
    name: str, tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    make, read = TRACKERS[name](tmp_path)
    tracker = make()
    marks = tmp_path / "marks"
    marks.mkdir()
    pause = PauseOnce("paused")
    async with orchestrator(
        storage=tmp_path / "runs", name="x", max_failures=1, failure_backoff=0,
        progress=False, hooks=[tracker, pause],
    ) as orch:  # fmt: skip
        trials = [
            orch.add_trial(
                FakeRecorder,
                {"delay": 0.01, "marks": str(marks), "fail_once_at": fail, "lr": lr},
                trial_id=trial_id,
                stop={"training_iteration": FINAL},
                checkpoint_every=5,
                resources=CPU,
            )
            for trial_id, fail, lr in SETUPS
        ]
        await orch.run()
    assert pause.done and trials[0].num_failures == 1
    assert all(t.state is TrialState.TERMINATED for t in trials)
    stats = tracker.statistics()
    assert stats.dropped == 0 and stats.failures == 0 and stats.replayed >= 1

    runs = read()
    assert sorted(runs) == ["fails", "paused", "plain"]
    for trial in trials:
        run = runs[trial.id]
        assert run.name == trial.id and run.status == "FINISHED"
        assert_each_step_once(run, FINAL)
        lr = run.params["lr"]
        assert float(lr) == trial.config["lr"]
    # The failure at 7 went back to the checkpoint of 5; 6 was re-run and not sent
    # again, and 7, the first step after it, carries the mark.
    assert runs["fails"].metrics[ROLLBACK_METRIC] == [(7, 5.0)]
    assert ROLLBACK_METRIC not in runs["paused"].metrics  # a pause goes back nowhere
    if name == "mlflow":
        assert runs["plain"].tags["team"] == "a"
    else:
        assert runs["plain"].group == "g"
        assert run_id_for("trackers", "g", "plain") == runs["plain"].run_id


@pytest.mark.parametrize("name", TRACKERS)
async def test_a_resumed_driver_continues_each_trials_run(
    name: str, tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    make, read = TRACKERS[name](tmp_path)
    first = make()
    final = 20
    options: dict[str, Any] = {
        "stop": {"training_iteration": final},
        "checkpoint_every": 5,
        "resources": CPU,
    }
    async with orchestrator(
        storage=tmp_path / "runs", name="x", progress=False, hooks=[first]
    ) as orch:
        trial = orch.add_trial(FakeRecorder, {"delay": 0.02}, trial_id="t", **options)
        running = asyncio.create_task(orch.run())
        while first.statistics().results < 13:  # past the checkpoint of 10
            await asyncio.sleep(0.01)
        running.cancel()  # the driver goes away: the hook's runs are not ended
        with contextlib.suppress(asyncio.CancelledError):
            await running
    first.close()
    assert first.statistics().failures == 0
    before = read()["t"]
    assert before.steps("count")[-1] >= 13

    second = make()  # a new driver's hook: it knows nothing of the first
    async with orchestrator(
        storage=tmp_path / "runs", name="x", resume=True, progress=False, hooks=[second]
    ) as orch:
        trial = orch.add_trial(FakeRecorder, {"delay": 0.02}, trial_id="t", **options)
        await orch.run()
    assert trial.state is TrialState.TERMINATED
    (run,) = read().values()
    assert run.run_id == before.run_id and run.status == "FINISHED"
    assert_each_step_once(run, final)
    if name == "wandb":
        assert run.segments == 2  # one offline file per driver, one run id


def hanging_tracker(name: str, uri: str, monkeypatch: pytest.MonkeyPatch) -> TrackerHook:
    """A hook whose tracker's endpoint is ``uri``, a server that never answers: MLflow's
    tracking server, or W&B's (online, its base URL pointed there: offline mode cannot
    hang). Either client gives up on it at once once the server is gone."""
    if name == "mlflow":
        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        return MLflowHook(uri, experiment_name="hangs", max_pending=5, close_grace=0.5)
    monkeypatch.setenv("WANDB_BASE_URL", uri)
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)  # any key: the server never reads it
    monkeypatch.setenv("WANDB_INIT_TIMEOUT", "600")  # no earlier give-up by W&B itself
    return WandbHook("hangs", mode="online", max_pending=5, close_grace=0.5)


def end_wandb_service() -> None:
    """Kill the W&B service process this test started, if any, and forget it: stuck on
    the silent server, it would hold ``wandb.teardown()`` for minutes."""
    import sys

    import psutil

    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "wandb" in " ".join(child.cmdline()):
                child.kill()
                child.wait(30)
    if "wandb" in sys.modules:
        with contextlib.suppress(ConnectionError):  # its service is gone: said so
            sys.modules["wandb"].teardown()


@pytest.mark.parametrize("name", ["mlflow", "wandb"])
async def test_a_tracker_that_never_answers_slows_no_trial(
    tmp_path: Path,
    orchestrator: MakeOrchestrator,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    caplog.set_level(logging.WARNING, logger="orchestrator.integrations")
    monkeypatch.chdir(tmp_path)  # W&B's files, if any, go here
    with silent_server() as uri:
        tracker = hanging_tracker(name, uri, monkeypatch)
        pause = PauseOnce("t0")
        async with orchestrator(
            storage=tmp_path / "runs", name="x", progress=False, hooks=[tracker, pause]
        ) as orch:
            trials = [
                orch.add_trial(
                    FakeRecorder,
                    {"delay": 0.005},
                    trial_id=f"t{i}",
                    stop={"training_iteration": 30},
                    resources=CPU,
                )
                for i in range(2)
            ]
            try:
                await orch.run()  # the pause, and the end, never waited for the tracker
            finally:
                end_wandb_service()
    assert pause.done
    assert all(t.state is TrialState.TERMINATED and t.iteration == 30 for t in trials)
    stats = tracker.statistics()
    assert stats.results == 60 and stats.sent == 0 and stats.dropped >= 55
    warnings = [r.getMessage() for r in caplog.records]
    assert sum("is not keeping up" in w for w in warnings) == 1, warnings
    assert sum("made no progress for 0.5 s" in w for w in warnings) == 1, warnings
    label = uri if name == "mlflow" else "W&B project hangs"
    assert any(label in w for w in warnings), warnings


async def test_a_trials_directory_is_stored_with_its_run_once_its_logs_are_written(
    tmp_path: Path, orchestrator: MakeOrchestrator
) -> None:
    # The trial ends well within the logs' first flush (each second): its directory is
    # stored when the experiment ends, after the built-in logs' own end wrote it whole.
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    client.create_experiment("files", (tmp_path / "artifacts").as_uri())
    runs = tmp_path / "runs"
    hook = MLflowHook(
        uri,
        experiment_name="files",
        artifact_dir=lambda t: str(runs / "x" / t.id),
        close_grace=GRACE,
    )
    async with orchestrator(storage=runs, name="x", progress=False, hooks=[hook]) as orch:
        orch.add_trial(
            FakeRecorder, {}, trial_id="t", stop={"training_iteration": 3}, resources=CPU
        )
        await orch.run()
    run = read_mlflow(uri, "files")["t"]
    assert run.status == "FINISHED"
    stored = Path(client.download_artifacts(run.run_id, "result.json", str(tmp_path)))
    lines = [json.loads(line) for line in stored.read_text().splitlines()]
    assert [r["training_iteration"] for r in lines] == [1, 2, 3]
