"""Damage injection: every object of a real experiment (the head, its backup, each kind
of result segment, the per-trial logs) truncated, zeroed, overwritten with garbage or
deleted, alone or with others, then ``repair``: every result that any object still
held is in the repaired journal, in its place; what no object holds is named as lost.

One experiment is run once per module (the fake Ray, 3 trials of 12 iterations), and
its results are laid out over four segments the way the journal's writer does (a base
from result 0, then each write's new rows from where the last left off), so that
"the first, a middle, the last segment" exist whatever the machine's speed. Each cell
damages a copy; S3 (moto) runs a representative subset.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, TrialState
from orchestrator.cli import main
from orchestrator.core.journal_format import BACKUP_KEY, JOURNAL_KEY, SEGMENTS_PREFIX
from orchestrator.core.json_codec import dumps
from orchestrator.errors import JournalDamaged
from orchestrator.journal.reader import load_experiment
from orchestrator.journal.repair import RepairReport, repair_experiment
from orchestrator.journal.sources import CSV_LOG, JSON_LOG
from orchestrator.views.loggers.csvfile import PROGRESS_FILE
from orchestrator.views.loggers.jsonfile import RESULT_FILE
from storage import open_storage

from ..support.fakeray import FakeRay
from ..support.finished_experiment import (
    ITERATIONS,
    NAME,
    SEGMENTS,
    add_trials,
)
from ..support.servers import BUCKET, aws_env, moto_url, unique_prefix  # noqa: F401
from ..support.trainables import setups


@pytest.fixture(scope="module")
async def truth(finished: Path) -> dict[str, list[dict[str, Any]]]:
    """Every trial's results as the intact journal holds them."""
    async with open_storage(finished / "runs" / NAME) as store:
        contents = await load_experiment(store)
    assert contents is not None
    found = {t.id: t.results for t in contents.trials}
    assert [len(r) for r in found.values()] == [ITERATIONS] * 3
    return found


# -- damage ------------------------------------------------------------------------------


def _truncated(data: bytes) -> bytes | None:
    """Torn in the middle of the line that straddles the object's half: a cut that
    happened to land just after a newline would leave a shorter but whole log, which
    is no damage (an earlier write looks the same) and, once in a few hundred runs,
    made this test expect a report of a log that was fine."""
    half = len(data) // 2
    start = data.rfind(b"\n", 0, half) + 1
    end = data.find(b"\n", half)
    end = len(data) if end < 0 else end
    return data[: start + max(1, (end - start) // 2)]


def _cut_at_a_line(data: bytes) -> bytes | None:
    """Cut just after the newline before the object's half: every line left is whole,
    so only what the lines add up to (or the head's count) shows the loss."""
    return data[: data.rfind(b"\n", 0, len(data) // 2) + 1]


def _zeroed(data: bytes) -> bytes | None:
    return bytes(len(data))


def _garbage(data: bytes) -> bytes | None:
    return random.Random(len(data)).randbytes(len(data))


def _missing(data: bytes) -> bytes | None:
    return None


KINDS: dict[str, Callable[[bytes], bytes | None]] = {
    "truncated": _truncated,
    "cut-at-a-line": _cut_at_a_line,
    "zeroed": _zeroed,
    "garbage": _garbage,
    "missing": _missing,
}


def segment(index: int) -> Callable[[list[str]], str]:
    return lambda keys: sorted(k for k in keys if k.startswith(SEGMENTS_PREFIX + "/"))[index]


def log_of(trial: int, name: str) -> Callable[[list[str]], str]:
    def pick(keys: list[str]) -> str:
        dirs = sorted({k.split("/")[0] for k in keys if k.endswith("/" + name)})
        return f"{dirs[trial]}/{name}"

    return pick


def key(name: str) -> Callable[[list[str]], str]:
    return lambda keys: name


HEAD, BACKUP = key(JOURNAL_KEY), key(BACKUP_KEY)
#: What each cell damages (every object with the same kind of damage).
TARGETS: dict[str, list[Callable[[list[str]], str]]] = {
    "head": [HEAD],
    "backup": [BACKUP],
    "head+backup": [HEAD, BACKUP],
    "first-segment": [segment(0)],
    "middle-segment": [segment(1)],
    "last-segment": [segment(-1)],
    "head+backup+middle-segment": [HEAD, BACKUP, segment(2)],
    "head+backup+first-segment+result.json": [HEAD, BACKUP, segment(0), log_of(0, JSON_LOG)],
    "head+backup+progress.csv": [HEAD, BACKUP, log_of(1, CSV_LOG)],
}


async def damage(store: Any, targets: list[Callable[[list[str]], str]], kind: str) -> list[str]:
    """Damage each target object of ``store`` with ``kind``; the damaged keys."""
    keys = await store.list("")
    damaged = []
    for target in targets:
        name = target(keys)
        new = KINDS[kind](await store.read_bytes(name))
        if new is None:
            await store.delete(name)
        else:
            await store.write_bytes(name, new)
        damaged.append(name)
    return damaged


async def repaired_results(store: Any) -> dict[str, list[dict[str, Any]]]:
    contents = await load_experiment(store)
    assert contents is not None
    return {t.id: t.results for t in contents.trials}


def check_report(report: RepairReport, store: Any, damaged: list[str], kind: str) -> None:
    """Every damaged object is named (and what it held); nothing is lost."""
    text = "\n".join(report.lines())
    for name in damaged:
        if store.uri_for(name) in text:
            continue
        if name.endswith(("/" + JSON_LOG, "/" + CSV_LOG)) and kind in ("missing", "cut-at-a-line"):
            continue  # a log never written, or written less far, is no damage
        # The first segment gone with every head that listed it: named by the lines
        # after it, which continue trials' results from a later position.
        assert name.endswith("-000000.jsonl") and kind == "missing", (name, text)
        assert "the segment(s) before" in text and "are missing" in text, text
    assert report.complete, text
    assert report.lost == []
    if report.action != "intact":
        assert "every result that survives anywhere is in the repaired journal" in text


@pytest.fixture
def copy(finished: Path, tmp_path: Path) -> Path:
    shutil.copytree(finished / "runs", tmp_path / "runs")
    return tmp_path / "runs" / NAME


# -- the matrix, on local storage ---------------------------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("target", list(TARGETS))
async def test_repair_keeps_every_result_that_survives_anywhere(
    copy: Path, truth: dict[str, list[dict[str, Any]]], target: str, kind: str
) -> None:
    async with open_storage(copy) as store:
        damaged = await damage(store, TARGETS[target], kind)
        report = await repair_experiment(store)
        check_report(report, store, damaged, kind)
        assert await repaired_results(store) == truth
        if target == "backup":
            assert report.action == "intact"  # the head and its segments read whole
        elif target == "head":
            assert report.action == "backup"
        else:
            assert report.action == "rebuilt"
        again = await repair_experiment(store)
    assert again.action == "intact"


async def test_a_segment_cut_in_half_is_named_and_its_results_come_from_result_json(
    copy: Path, truth: dict[str, list[dict[str, Any]]]
) -> None:
    """The measured case: head and backup damaged, the base segment cut in half. No
    trial keeps only its later rows: each gets its first ones back from its
    ``result.json``, and the report says so, by trial and iterations."""
    async with open_storage(copy) as store:
        (first,) = [k for k in await store.list(SEGMENTS_PREFIX)][:1]
        await damage(store, [HEAD, BACKUP, key(first)], "truncated")
        cut = await store.read_bytes(first)
        report = await repair_experiment(store)
        assert await repaired_results(store) == truth
    # The cut segment is kept, as it was, where no compaction deletes it.
    (aside,) = copy.glob(f"experiment_state.damaged-*.results/{first.rpartition('/')[2]}")
    assert aside.read_bytes() == cut
    text = "\n".join(report.lines())
    assert f"damaged: {store.uri_for(first)} is truncated" in text
    # The cut line's trial is named as one whose results the segment held.
    assert "results from #1 on cut off" in text
    ids = list(truth)
    recovered = {r.trial: r for r in report.recovered}
    cut_trials = [t for t in ids if t in recovered]
    assert cut_trials  # the cut lost at least the last trial's line of the base
    for trial in cut_trials:
        got = recovered[trial]
        assert got.source == store.uri_for(f"{trial}/{JSON_LOG}")
        assert got.iterations == tuple(range(1, ITERATIONS // SEGMENTS + 1))
        assert f"trial {trial}: iterations 1-{ITERATIONS // SEGMENTS} recovered from" in text


async def test_a_missing_segment_is_named_with_what_it_held(
    copy: Path, truth: dict[str, list[dict[str, Any]]]
) -> None:
    """No head lists it any more: the segments numbered around it name it, and the
    holes its loss left say what it held, trial by trial."""
    async with open_storage(copy) as store:
        *_, name = await damage(store, [HEAD, BACKUP, segment(1)], "missing")
        report = await repair_experiment(store)
    chunk = ITERATIONS // SEGMENTS
    (named,) = [d for d in report.damaged if d.where == store.uri_for(name)]
    assert named.what == "is missing (the segments around it are there)"
    assert named.held == "; ".join(
        f"trial {t}: results #{chunk + 1}-{2 * chunk} gone with it" for t in truth
    )
    assert report.complete


async def test_results_no_object_holds_are_named_as_lost_and_the_rest_keep_their_place(
    copy: Path, truth: dict[str, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    """A middle segment gone with one trial's logs and the head and backup: that
    trial's rows of that segment are lost (the report and the exit status say so), its
    later rows keep their iterations, and the other trials lose nothing."""
    async with open_storage(copy) as store:
        await damage(
            store, [HEAD, BACKUP, segment(1), log_of(0, JSON_LOG), log_of(0, CSV_LOG)], "missing"
        )
    status = await asyncio.to_thread(
        main, ["repair", "--storage", str(copy.parent), "--name", NAME]
    )
    out, err = capsys.readouterr()
    assert status == 1, out + err
    async with open_storage(copy) as store:
        results = await repaired_results(store)
    trial = sorted(truth)[0]
    chunk = ITERATIONS // SEGMENTS
    kept = [r["training_iteration"] for r in results[trial]]
    assert kept == [i for i in range(1, ITERATIONS + 1) if not chunk < i <= 2 * chunk]
    assert {t: r for t, r in results.items() if t != trial} == {
        t: r for t, r in truth.items() if t != trial
    }
    flat = " ".join(out.split())
    assert (
        f"trial {trial}: LOST {chunk} result(s) (after iteration {chunk} and before "
        f"iteration {2 * chunk + 1})" in flat
    )
    assert f"{chunk} result(s) could not be saved" in flat


async def test_a_trial_with_no_result_left_is_lost_as_far_as_its_checkpoints_go(
    copy: Path, truth: dict[str, list[dict[str, Any]]]
) -> None:
    """Every segment gone with the head, the backup and one trial's logs: the others'
    results all come from their logs; that trial's checkpoint at iteration 12 says 12
    results existed, and the report says they are lost."""
    async with open_storage(copy) as store:
        keys = await store.list(SEGMENTS_PREFIX)
        targets = [HEAD, BACKUP, log_of(0, JSON_LOG), log_of(0, CSV_LOG)]
        await damage(store, targets + [key(k) for k in keys], "missing")
        report = await repair_experiment(store)
        results = await repaired_results(store)
    trial = sorted(truth)[0]
    assert results == {**truth, trial: []}
    assert [(x.trial, x.count) for x in report.lost] == [(trial, ITERATIONS)]
    assert not report.complete
    assert f"trial {trial}: LOST {ITERATIONS} result(s) (before iteration 13)" in "\n".join(
        report.lines()
    )


async def test_a_format_1_head_keeps_its_inline_results(
    copy: Path, truth: dict[str, list[dict[str, Any]]]
) -> None:
    """A head of the first format (every result inline, no segments) cut in its last
    entry: the whole entries' results are kept, the cut one's come from its log."""
    head = json.loads((copy / JOURNAL_KEY).read_bytes())
    head["format"] = 1
    del head["segments"]
    for entry in head["trials"]:
        entry["results"] = truth[entry["id"]]
        del entry["results_count"]
    text = dumps(head)
    last = head["trials"][-1]["id"]
    (copy / JOURNAL_KEY).write_text(text[: text.index(f'"id":"{last}"')])
    (copy / BACKUP_KEY).unlink()
    shutil.rmtree(copy / SEGMENTS_PREFIX)
    async with open_storage(copy) as store:
        report = await repair_experiment(store)
        assert await repaired_results(store) == truth
    assert report.complete and report.whole == 2
    assert [(r.trial, r.source.rpartition("/")[2]) for r in report.recovered] == [(last, JSON_LOG)]


def test_the_log_names_agree_with_the_loggers() -> None:
    assert (JSON_LOG, CSV_LOG) == (RESULT_FILE, PROGRESS_FILE)


# -- end to end: repair, then resume ------------------------------------------------------


async def test_repair_then_resume_runs_nothing_again_and_keeps_every_log_line(
    finished: Path, copy: Path, truth: dict[str, list[dict[str, Any]]], fake_ray: FakeRay
) -> None:
    """The measured case end to end: after repair, the same script resumes, nothing
    runs again, and every trial's ``result.json`` still holds every iteration."""
    async with open_storage(copy) as store:
        await damage(store, [HEAD, BACKUP, segment(0)], "truncated")
        report = await repair_experiment(store)
    assert report.complete
    ran = setups(finished / "marks")
    async with Orchestrator(
        storage=copy.parent,
        name=NAME,
        resume=True,
        progress=False,
        loggers=["json", "csv"],
        _ray_backend=fake_ray,
    ) as orch:
        trials = add_trials(orch, finished / "marks")
        await orch.run()
    assert [t.state for t in trials] == [TrialState.TERMINATED] * 3
    assert {t.id: t.results for t in trials} == truth
    assert setups(finished / "marks") == ran
    for trial in trials:
        lines = (copy / trial.id / JSON_LOG).read_text().splitlines()
        assert [json.loads(x)["training_iteration"] for x in lines] == list(
            range(1, ITERATIONS + 1)
        )


# -- S3: a representative subset ----------------------------------------------------------

S3_CELLS = [
    ("head+backup+middle-segment", "truncated"),
    ("first-segment", "missing"),
    ("head", "garbage"),
    ("head+backup+first-segment+result.json", "zeroed"),
]


@pytest.mark.parametrize(("target", "kind"), S3_CELLS)
async def test_repair_on_s3_keeps_every_result(
    finished: Path,
    truth: dict[str, list[dict[str, Any]]],
    moto_url: str,  # noqa: F811
    target: str,
    kind: str,
) -> None:
    uri = f"s3://{BUCKET}/{unique_prefix()}/{NAME}"
    async with open_storage(uri, endpoint_url=moto_url) as store:
        experiment = finished / "runs" / NAME
        for path in sorted(experiment.rglob("*")):
            relative = path.relative_to(experiment).as_posix()
            if path.is_file() and not any(p.startswith(".") for p in relative.split("/")):
                await store.write_bytes(relative, path.read_bytes())
        damaged = await damage(store, TARGETS[target], kind)
        report = await repair_experiment(store)
        check_report(report, store, damaged, kind)
        assert await repaired_results(store) == truth


async def test_a_segment_cut_at_a_lines_end_is_refused_not_read_with_results_moved(
    copy: Path,
) -> None:
    """Every line left parses; replaying them would put a trial's later results in the
    places of the lost ones. A resume refuses the journal and names the segment after
    the hole."""
    async with open_storage(copy) as store:
        keys = await store.list("")
        await damage(store, [segment(0)], "cut-at-a-line")
        with pytest.raises(JournalDamaged) as caught:
            await load_experiment(store)
    assert caught.value.where == store.uri_for(segment(1)(keys))
    assert "lines of theirs are lost" in caught.value.what
