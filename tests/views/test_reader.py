"""orchestrator.views.experiments: the journal as plain data, checked against what a run held
in memory (on the fake Ray: the journal is the engine's, not Ray's) and against heads
written by hand (both formats, newer fields, rollbacks), and never importing or
unpickling the trials' code."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest

from orchestrator import JournalError, TrialState
from orchestrator.core.journal_format import JOURNAL_KEY, SEGMENTS_PREFIX, replay_results
from orchestrator.journal.reader import load as load_journal
from orchestrator.views.experiments import ExperimentRecord, list_experiments, read_experiment
from storage import BucketNotFound, open_storage

from ..support.journal_heads import (
    MARKER_MODULE,
    MARKER_SOURCE,
    entry,
    rows,
    run_tiny_experiment,
    segment,
    write_head,
)


async def read(path: Path) -> ExperimentRecord | None:
    async with open_storage(path) as store:
        return await read_experiment(store)


# -- a run -------------------------------------------------------------------------------


async def test_a_runs_journal_reads_as_the_run_left_its_trials(tmp_path: Path) -> None:
    trials = await run_tiny_experiment(tmp_path, "tiny")
    assert [t.state for t in trials] == [
        TrialState.TERMINATED,
        TrialState.TERMINATED,
        TrialState.ERROR,
    ], [t.error for t in trials]
    record = await read(tmp_path / "tiny")
    assert record is not None
    assert (record.name, record.uri, record.sweeps) == ("tiny", str(tmp_path / "tiny"), [])
    assert record.written_at is not None and record.started_at is not None
    assert record.started_at <= record.written_at
    assert [t.id for t in record.trials] == ["steady", "recovers", "fails"]
    async with open_storage(tmp_path / "tiny") as store:
        resumable = {t.id: t for t in await load_journal(store) or []}
    for trial, got in zip(trials, record.trials, strict=True):
        assert got.trainable == f"tests.support.trainables:{trial.trainable_cls.__name__}"
        assert got.config == trial.config
        assert (got.state, got.iteration, got.num_failures) == (
            trial.state.value,
            trial.iteration,
            trial.num_failures,
        )
        assert got.error == (str(trial.error) if trial.error is not None else None)
        assert got.results == json.loads(json.dumps(trial.results))
        assert got.results == resumable[trial.id].results  # what a resume would read
        assert got.checkpoints == [
            {"iteration": c.iteration, "uri": c.uri, "key": c.key, "metrics": dict(c.metrics)}
            for c in trial.checkpoints
        ]
        assert got.events == resumable[trial.id].events
        assert got.config_now is None  # no exploit changed it
    steady, recovers, fails = record.trials
    assert [c["iteration"] for c in steady.checkpoints] == [2, 4, 6]
    assert steady.trainable == "tests.support.trainables:Counter"
    assert recovers.trainable == "tests.support.trainables:Recorder"
    # the failure at step 5 rolled back to the checkpoint at 3: no iteration twice
    assert [r["training_iteration"] for r in recovers.results] == [1, 2, 3, 4, 5, 6]
    assert recovers.num_failures == 1
    assert fails.state == "ERROR" and "planned failure at 2" in (fails.error or "")
    assert record.best("score", "max") == ("steady", 6.0)


async def test_a_moved_experiments_checkpoints_are_where_it_is_now(tmp_path: Path) -> None:
    """The journal names a checkpoint by its key: after the directory moves, a resume
    loads each from the new place, not from where it was written."""
    await run_tiny_experiment(tmp_path / "before", "tiny")
    moved = tmp_path / "after" / "renamed"
    moved.parent.mkdir()
    (tmp_path / "before" / "tiny").rename(moved)
    async with open_storage(moved) as store:
        trials = {t.id: t for t in await load_journal(store) or []}
    checkpoints = trials["steady"].checkpoints
    assert [c.iteration for c in checkpoints] == [2, 4, 6]
    for ckpt in checkpoints:
        assert ckpt.uri == f"file://{moved / ckpt.key}" and ckpt.path == str(moved / ckpt.key)
        assert Path(ckpt.path).is_dir()


# -- heads written by hand -------------------------------------------------------------


async def test_segments_replay_in_order_with_rollbacks_and_cuts(tmp_path: Path) -> None:
    first, second = f"{SEGMENTS_PREFIX}/x-000000.jsonl", f"{SEGMENTS_PREFIX}/x-000001.jsonl"
    a = rows(5.0, 4.0, 3.0)
    b = rows(9.0, 8.0)
    head = {
        "format": 2,
        "name": "hand",
        "written_at": 1700000000.0,
        "segments": [first, second],
        "trials": [
            entry("a", results_count=3, iteration=3),
            entry("b", results_count=1, iteration=1),  # cut after its last segment
        ],
    }
    write_head(
        tmp_path / "hand",
        head,
        {
            first: segment(
                {"trial": "a", "from": 0, "rows": a}, {"trial": "b", "from": 0, "rows": b}
            ),
            # a restore to iteration 1: a's rows from index 1 on are replaced
            second: segment({"trial": "a", "from": 1, "rows": rows(7.0, 6.0, 2.5)[1:]}),
        },
    )
    record = await read(tmp_path / "hand")
    assert record is not None
    got = {t.id: [r["loss"] for r in t.results] for t in record.trials}
    assert got == {"a": [5.0, 6.0, 2.5], "b": [9.0]}
    # the orchestrator's own loader agrees on every trial
    async with open_storage(tmp_path / "hand") as store:
        loaded = await load_journal(store)
    assert loaded is not None
    assert {t.id: [r["loss"] for r in t.results] for t in loaded} == got
    assert record.started_at == 1700000000.0  # no started_at, no timestamps: written_at
    assert record.best("loss", "min") == ("a", 2.5)
    assert record.best("loss", "max") == ("b", 9.0)
    assert record.best("accuracy", "max") is None


def test_replay_of_a_format_1_head_takes_the_inline_results() -> None:
    head = {"trials": [{"id": "a", "results": rows(1.0, 2.0)}, {"id": "b"}]}
    assert replay_results(head, [b"ignored"]) == {"a": rows(1.0, 2.0), "b": []}


async def test_a_format_1_head_reads_with_its_inline_results(tmp_path: Path) -> None:
    trial = entry("a", results=rows(3.0, 1.0), iteration=2)
    del trial["results_count"]
    write_head(tmp_path / "old", {"format": 1, "name": "ran-as", "trials": [trial]})
    record = await read(tmp_path / "old")
    assert record is not None
    assert record.name == "old"  # its folder, which `show --name` takes
    assert [r["loss"] for r in record.trials[0].results] == [3.0, 1.0]
    assert record.written_at is None and record.started_at is None


async def test_newer_fields_pass_through_and_default_when_absent(tmp_path: Path) -> None:
    events = [
        {"kind": "failure", "iteration": 3, "error": "boom"},
        {"kind": "restore", "iteration": 2},
    ]
    sweep = {
        "name": "pbt",
        "metric": "loss",
        "mode": "min",
        "trials": ["a"],
        "lineage": [
            {
                "trial_id": "a",
                "time": 4,
                "donor_id": "b",
                "donor_checkpoint_iteration": 4,
                "old_config": {"lr": 0.1},
                "new_config": {"lr": 0.2},
            }
        ],
    }
    seg = f"{SEGMENTS_PREFIX}/s-000000.jsonl"
    stamped = [{**r, "timestamp": 1600000000.0 + i} for i, r in enumerate(rows(2.0, 1.0))]
    write_head(
        tmp_path / "new",
        {
            "format": 2,
            "name": "new",
            "written_at": 1700000000.0,
            "started_at": 1690000000.0,
            "sweeps": [sweep],
            "segments": [seg],
            "trials": [entry("a", events=events, results_count=2), entry("b", results_count=2)],
        },
        {
            seg: segment(
                {"trial": "a", "from": 0, "rows": stamped},
                {"trial": "b", "from": 0, "rows": stamped},
            )
        },
    )
    record = await read(tmp_path / "new")
    assert record is not None
    assert record.sweeps == [sweep]
    assert record.objective() == ("loss", "min")
    assert record.started_at == 1690000000.0
    a, b = record.trials
    assert (a.events, b.events) == (events, [])
    # without the head's started_at, the earliest result's timestamp
    head = json.loads((tmp_path / "new" / JOURNAL_KEY).read_text())
    del head["started_at"]
    (tmp_path / "new" / JOURNAL_KEY).write_text(json.dumps(head))
    again = await read(tmp_path / "new")
    assert again is not None and again.started_at == 1600000000.0


async def test_no_code_is_imported_or_unpickled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trainable path whose module does not exist, and pickles that would import a
    module if loaded: the reader reads the plain fields and loads neither."""
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / f"{MARKER_MODULE}.py").write_text(MARKER_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    pickled = base64.b64encode(f"c{MARKER_MODULE}\nBoom\n.".encode()).decode()
    seg = f"{SEGMENTS_PREFIX}/p-000000.jsonl"
    write_head(
        tmp_path / "exp",
        {
            "format": 2,
            "name": "exp",
            "segments": [seg],
            "trials": [
                entry(
                    "a",
                    trainable="no_such_mod:X",
                    config={"lr": 0.1, "odd": "<object at 0x1>"},
                    config_pickle=pickled,
                    stop_pickle=pickled,
                    results_count=1,
                ),
                entry("b", trainable=None, trainable_pickle=pickled, config_pickle=pickled),
            ],
        },
        {seg: segment({"trial": "a", "from": 0, "rows": rows(1.0)})},
    )
    record = await read(tmp_path / "exp")
    assert record is not None
    a, b = record.trials
    assert (a.trainable, a.config) == ("no_such_mod:X", {"lr": 0.1, "odd": "<object at 0x1>"})
    assert b.trainable == "(pickled)"
    assert MARKER_MODULE not in sys.modules
    assert not (tmp_path / "code" / f"{MARKER_MODULE}.imported").exists()
    summaries = await list_experiments(str(tmp_path))
    assert [s.name for s in summaries] == ["exp"]
    assert MARKER_MODULE not in sys.modules


async def test_no_journal_is_none_and_a_broken_one_is_a_journal_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert await read(tmp_path / "empty") is None
    write_head(tmp_path / "bad", {"format": 2})
    (tmp_path / "bad" / JOURNAL_KEY).write_text("{not json")
    with pytest.raises(JournalError, match=rf"{tmp_path / 'bad' / JOURNAL_KEY} is not JSON"):
        await read(tmp_path / "bad")
    missing = f"{SEGMENTS_PREFIX}/gone-000000.jsonl"
    write_head(tmp_path / "gone", {"format": 2, "segments": [missing], "trials": [entry("a")]})
    with pytest.raises(JournalError, match=rf"{missing} is missing \(the head .* lists it\)"):
        await read(tmp_path / "gone")


# -- listing ---------------------------------------------------------------------------


async def test_list_experiments_finds_the_children_with_a_journal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sweep = {"name": "s", "metric": "loss", "mode": "min", "trials": ["a", "b"], "lineage": []}
    seg = f"{SEGMENTS_PREFIX}/l-000000.jsonl"
    write_head(
        tmp_path / "swept",
        {
            "format": 2,
            "name": "swept",
            "written_at": 1700000100.0,
            "started_at": 1700000000.0,
            "sweeps": [sweep],
            "segments": [seg],
            "trials": [
                entry("a", results_count=2),
                entry("b", results_count=2, state="ERROR"),
                entry("c", results_count=2),  # not in the sweep: not ranked
            ],
        },
        {
            seg: segment(
                {"trial": "a", "from": 0, "rows": rows(3.0, 2.0)},
                {"trial": "b", "from": 0, "rows": rows(3.0, 1.5)},
                {"trial": "c", "from": 0, "rows": rows(0.1, 0.1)},
            )
        },
    )
    # moved since it ran: listed by its folder, the name `show --name` takes
    write_head(tmp_path / "plain", {"format": 2, "name": "moved", "trials": [entry("x")]})
    (tmp_path / "no-journal" / "t").mkdir(parents=True)
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "deeper" / "nested").mkdir(parents=True)
    write_head(tmp_path / "deeper" / "nested", {"format": 2, "trials": []})  # two levels down

    found = await list_experiments(str(tmp_path))
    assert [s.name for s in found] == ["plain", "swept"]
    plain, swept = found
    assert plain.trials_by_state == {"TERMINATED": 1}
    assert (plain.best, plain.metric, plain.mode) == (None, None, None)
    assert swept.trials_by_state == {"ERROR": 1, "TERMINATED": 2}
    assert (swept.best, swept.metric, swept.mode) == (("b", 1.5), "loss", "min")
    assert (swept.started_at, swept.written_at) == (1700000000.0, 1700000100.0)
    assert swept.uri == str(tmp_path / "swept")

    assert await list_experiments(str(tmp_path / "no-journal")) == []
    (tmp_path / "damaged").mkdir()
    (tmp_path / "damaged" / JOURNAL_KEY).write_text("{not json")
    damaged, *rest = await list_experiments(str(tmp_path))  # listed, as damaged
    assert [s.name for s in rest] == ["plain", "swept"]
    assert (damaged.name, damaged.trials_by_state, damaged.uri) == (
        "damaged",
        {},
        str(tmp_path / "damaged"),
    )
    assert damaged.damaged == (
        f"{JOURNAL_KEY} is not JSON at byte 1 of 9 (Expecting property name enclosed in "
        "double quotes)"
    )
    with pytest.raises(BucketNotFound):
        await list_experiments(str(tmp_path / "nowhere"))
