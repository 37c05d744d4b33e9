"""A resumed experiment never loses a row its per-trial logs hold (issue 31): rows the
journal lost (a damaged segment) are taken back into the journal from ``result.json``,
and a log holding rows the resumed trial abandons (after the checkpoint it restarts
from) is kept aside, named, before the logger rewrites it. On the fake Ray, with the
real logger."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import storage
from orchestrator import Trial, TrialState
from orchestrator.core.journal_format import BACKUP_KEY, JOURNAL_KEY, merge_sealed
from orchestrator.journal.reader import load_experiment
from orchestrator.journal.sealed import read_listed

from ..support.fake_engine import MakeOrchestrator
from ..support.servers import BUCKET, aws_env, moto_url, unique_prefix  # noqa: F401
from ..support.trainables import Counter

CPU = {"cpu": 0.25}
OPTIONS: dict[str, Any] = {
    "stop": {"training_iteration": 30},
    "checkpoint_every": 10,
    "resources": CPU,
    "trial_id": "t",
}


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def iterations(path: Path) -> list[int]:
    return [r["training_iteration"] for r in rows(path)]


def csv_iterations(path: Path) -> list[int]:
    lines = path.read_text().splitlines()
    column = lines[0].split(",").index("training_iteration")
    return [int(line.split(",")[column]) for line in lines[1:]]


async def journaled(root: Path | str, **options: Any) -> Any:
    async with storage.open_storage(root, **options) as store:
        return await load_experiment(store)


async def rewrite_journal(
    root: Path | str,
    change: Callable[[dict[str, Any], list[Any]], list[Any]],
    **options: Any,
) -> None:
    """Rewrite the experiment's journal as one format-1 head (results inline), the
    trial's entry and results passed through ``change``: a journal that lost rows."""
    (entry_now,) = (await journaled(root, **options)).trials
    async with storage.open_storage(root, **options) as store:
        raw = json.loads(await store.read_bytes(JOURNAL_KEY))
        head, _ = merge_sealed(raw, await read_listed(store, raw))  # its entry, if sealed
        (entry,) = head["trials"]
        entry["results"] = change(entry, [dict(r) for r in entry_now.results])
        entry.pop("results_count", None)
        head["format"] = 1
        head.pop("segments", None)
        data = json.dumps(head).encode()
        await store.write_bytes(JOURNAL_KEY, data)
        await store.write_bytes(BACKUP_KEY, data)


async def first_run(storage: Path, orchestrator: MakeOrchestrator) -> Path:
    async with orchestrator(storage=storage, name="logs", progress=False) as orch:
        trial = orch.add_trial(Counter, {}, **OPTIONS)
        await orch.run()
    assert trial.state is TrialState.TERMINATED
    folder = storage / "logs" / "t"
    assert iterations(folder / "result.json") == list(range(1, 31))
    return folder


async def journaled_iterations(root: Path | str, **options: Any) -> list[int]:
    (entry,) = (await journaled(root, **options)).trials
    return [r["training_iteration"] for r in entry.results]


def crashed(entry: dict[str, Any], results: list[Any]) -> list[Any]:
    """The driver died at iteration 30, its logs flushed, its journal's last write at 25
    (newest checkpoint 20)."""
    entry["state"] = "RUNNING"
    entry["iteration"] = 25
    entry["checkpoints"] = [c for c in entry["checkpoints"] if c["iteration"] <= 20]
    assert entry["checkpoints"]
    return [r for r in results if r["training_iteration"] <= 25]


LOST = {
    "prefix": lambda r: r["training_iteration"] > 13,
    "middle": lambda r: not 9 <= r["training_iteration"] <= 17,
    "suffix": lambda r: r["training_iteration"] <= 21,
}


@pytest.mark.parametrize("lost", sorted(LOST))
async def test_rows_the_journal_lost_come_back_from_result_json(
    tmp_path: Path,
    orchestrator: MakeOrchestrator,
    caplog: pytest.LogCaptureFixture,
    lost: str,
) -> None:
    folder = await first_run(tmp_path, orchestrator)
    before = rows(folder / "result.json")
    keep = LOST[lost]
    await rewrite_journal(tmp_path / "logs", lambda entry, results: [r for r in results if keep(r)])
    assert len(await journaled_iterations(tmp_path / "logs")) < 30

    with caplog.at_level(logging.WARNING, logger="orchestrator"):
        async with orchestrator(storage=tmp_path, name="logs", resume=True, progress=False) as orch:
            trial = orch.add_trial(Counter, {}, **OPTIONS)
            assert [r["training_iteration"] for r in trial.results] == list(range(1, 31))
            await orch.run()
    assert trial.state is TrialState.TERMINATED
    assert rows(folder / "result.json") == before  # not a row lost, none changed
    assert csv_iterations(folder / "progress.csv") == list(range(1, 31))
    assert await journaled_iterations(tmp_path / "logs") == list(range(1, 31))  # the journal whole
    said = [r.getMessage() for r in caplog.records if "recovered" in r.getMessage()]
    assert len(said) == 1 and "trial t" in said[0] and "result.json" in said[0], said
    assert not list(folder.glob("*.kept-*"))  # nothing to keep aside: the journal has it all


async def test_rows_after_the_resume_point_are_kept_aside_and_named(
    tmp_path: Path, orchestrator: MakeOrchestrator, caplog: pytest.LogCaptureFixture
) -> None:
    """The driver died at iteration 30 (the logs flushed) with the journal at 25 and its
    newest journaled checkpoint at 20: the trial runs 21..30 again, so the logs' 21..30
    are an abandoned run's. They are kept aside, whole, and the new logs hold the
    history the trial goes on with."""
    folder = await first_run(tmp_path, orchestrator)
    result_before = (folder / "result.json").read_bytes()
    csv_before = (folder / "progress.csv").read_bytes()

    await rewrite_journal(tmp_path / "logs", crashed)
    with caplog.at_level(logging.WARNING, logger="orchestrator"):
        async with orchestrator(storage=tmp_path, name="logs", resume=True, progress=False) as orch:
            trial = orch.add_trial(Counter, {}, **OPTIONS)
            assert trial.iteration == 20
            await orch.run()
    assert trial.state is TrialState.TERMINATED
    assert iterations(folder / "result.json") == list(range(1, 31))  # the new run's
    (kept_result,) = folder.glob("result.json.kept-*")
    (kept_csv,) = folder.glob("progress.csv.kept-*")
    assert kept_result.read_bytes() == result_before
    assert kept_csv.read_bytes() == csv_before
    said = [r.getMessage() for r in caplog.records if "kept aside" in r.getMessage()]
    assert len(said) == 1 and kept_result.name in said[0], said


async def test_a_resume_that_drops_nothing_keeps_nothing_aside(
    tmp_path: Path, orchestrator: MakeOrchestrator, caplog: pytest.LogCaptureFixture
) -> None:
    folder = await first_run(tmp_path, orchestrator)
    before = (folder / "result.json").read_bytes()
    with caplog.at_level(logging.WARNING, logger="orchestrator"):
        async with orchestrator(storage=tmp_path, name="logs", resume=True, progress=False) as orch:
            orch.add_trial(Counter, {}, **OPTIONS)
            await orch.run()
    assert (folder / "result.json").read_bytes() == before
    assert not list(folder.glob("*.kept-*"))
    assert not [r for r in caplog.records if "kept aside" in r.getMessage()]


async def test_on_s3_lost_rows_come_back_and_the_uploaded_log_is_kept_aside(
    moto_url: str,  # noqa: F811
    orchestrator: MakeOrchestrator,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A remote experiment's logs are written on the driver's disk and uploaded whole:
    the resumed logger starts from an empty folder, so an upload would replace the
    bucket's copy. Both rules hold there too: a lost prefix comes back from the
    uploaded result.json, which is kept aside in the bucket before it is replaced."""
    root = f"s3://{BUCKET}/{unique_prefix()}"
    options = {"endpoint_url": moto_url}
    where = f"{root}/logs"
    run = {"storage": root, "name": "logs", "progress": False, "storage_options": options}
    async with orchestrator(**run) as orch:
        trial = orch.add_trial(Counter, {}, **OPTIONS)
        await orch.run()
    async with storage.open_storage(where, **options) as store:
        before = await store.read_bytes("t/result.json")
    assert [r["training_iteration"] for r in map(json.loads, before.splitlines())] == list(
        range(1, 31)
    )

    def lost_and_crashed(entry: dict[str, Any], results: list[Any]) -> list[Any]:
        return [r for r in crashed(entry, results) if r["training_iteration"] > 13]

    await rewrite_journal(where, lost_and_crashed, **options)
    with caplog.at_level(logging.WARNING, logger="orchestrator"):
        async with orchestrator(**run, resume=True) as orch:
            trial = orch.add_trial(Counter, {}, **OPTIONS)
            assert [r["training_iteration"] for r in trial.results] == list(range(1, 21))
            await orch.run()
    assert trial.state is TrialState.TERMINATED
    async with storage.open_storage(where, **options) as store:
        after = await store.read_bytes("t/result.json")
        kept = [k for k in await store.list("t/") if ".kept-" in k]
        assert sorted(k.split(".kept-")[0] for k in kept) == ["t/progress.csv", "t/result.json"]
        (kept_result,) = (k for k in kept if k.startswith("t/result.json"))
        assert await store.read_bytes(kept_result) == before
    lines = [json.loads(line) for line in after.splitlines()]
    assert [r["training_iteration"] for r in lines] == list(range(1, 31))
    assert lines[:20] == [json.loads(line) for line in before.splitlines()][:20]
    assert await journaled_iterations(where, **options) == list(range(1, 31))
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "iterations 1-13 recovered" in messages and kept_result in messages


class NewConfigAt15:
    """At iteration 15, restores the trial's checkpoint at 10 with a new config (as a
    PBT exploit does): 11..15 and any later leave the history, and the config changes."""

    done = False

    async def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> None:
        if result["training_iteration"] == 15 and not self.done:
            self.done = True
            (first,) = [c for c in trial.checkpoints if c.iteration == 10]
            await trial.restore(first, config={"lr": 0.5})


async def test_a_rollback_keeps_its_rows_and_a_resume_keeps_the_config_history(
    tmp_path: Path, orchestrator: MakeOrchestrator, caplog: pytest.LogCaptureFixture
) -> None:
    """A rollback during the run moves the abandoned rows to result.abandoned.json; a
    resume, whose logger starts params_history.jsonl afresh, keeps the old one aside."""
    async with orchestrator(
        storage=tmp_path, name="logs", progress=False, hooks=[NewConfigAt15()]
    ) as orch:
        trial = orch.add_trial(Counter, {"lr": 0.1}, **OPTIONS)
        await orch.run()
    assert trial.state is TrialState.TERMINATED and trial.config == {"lr": 0.5}
    folder = tmp_path / "logs" / "t"
    assert iterations(folder / "result.json") == list(range(1, 31))
    gone = iterations(folder / "result.abandoned.json")  # the run went on while the hook ran
    assert gone == list(range(11, gone[-1] + 1)) and gone[-1] >= 15
    configs = rows(folder / "params_history.jsonl")
    assert [(c["iteration"], c["config"]["lr"]) for c in configs] == [(0, 0.1), (10, 0.5)]
    abandoned = (folder / "result.abandoned.json").read_bytes()
    history = (folder / "params_history.jsonl").read_bytes()

    with caplog.at_level(logging.WARNING, logger="orchestrator"):
        async with orchestrator(storage=tmp_path, name="logs", resume=True, progress=False) as orch:
            orch.add_trial(Counter, {"lr": 0.1}, **OPTIONS)
            await orch.run()
    assert iterations(folder / "result.json") == list(range(1, 31))
    assert (folder / "result.abandoned.json").read_bytes() == abandoned  # untouched
    (kept,) = folder.glob("params_history.jsonl.kept-*")
    assert kept.read_bytes() == history
    assert not list(folder.glob("result.json.kept-*"))  # nothing of it was abandoned
    said = [r.getMessage() for r in caplog.records if "kept aside" in r.getMessage()]
    assert len(said) == 1 and kept.name in said[0], said
