"""A damaged journal: named before Ray starts (which object, what is wrong, how to
recover), listed as damaged by ``ls``, and repaired from what survives: the head's
backup, else the result segments and checkpoints, after which the same script resumes
its trials without running any again. On local storage (one run for the module on the
fake Ray, copied per test) and on S3 (moto)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

import orchestrator.engine.raystart
from orchestrator import Orchestrator, Trial, TrialState
from orchestrator.cli import main
from orchestrator.core.journal_format import BACKUP_KEY, JOURNAL_KEY
from orchestrator.errors import ExperimentExists, JournalDamaged
from orchestrator.journal.repair import repair_experiment
from orchestrator.views.experiments import read_experiment
from storage import open_storage

from ..support.fakeray import FakeRay
from ..support.rich_tables import table
from ..support.servers import BUCKET, aws_env, moto_url, unique_prefix  # noqa: F401
from ..support.trainables import Recorder, setups

NAME = "exp"
CPU = {"cpu": 0.25}
CONFIGS = [{"lr": 0.1}, {"lr": 0.01}, {"lr": 0.1}]  # two of one config: order matters


def add_trials(orch: Orchestrator, marks: Path) -> list[Trial]:
    """The script's calls: the same in the first run and in every resume."""
    return [
        orch.add_trial(
            Recorder,
            {**config, "marks": str(marks)},
            stop={"training_iteration": 4},
            checkpoint_every=2,
            resources=CPU,
        )
        for config in CONFIGS
    ]


@pytest.fixture(scope="module")
async def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A storage root holding ``exp``: three TERMINATED trials of 4 iterations, with
    checkpoints at 2 and 4 (and a marks folder counting each trial's setups)."""
    root = tmp_path_factory.mktemp("finished")
    (root / "marks").mkdir()
    fake = FakeRay(root / "nodes")
    async with Orchestrator(
        storage=root / "runs", name=NAME, progress=False, _ray_backend=fake
    ) as orch:
        trials = add_trials(orch, root / "marks")
        await orch.run()
    fake.close()
    assert all(t.state is TrialState.TERMINATED for t in trials)
    return root


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables wide enough that no cell wraps (rich reads COLUMNS)."""
    monkeypatch.setenv("COLUMNS", "300")


@pytest.fixture
def copy(finished: Path, tmp_path: Path) -> Path:
    """This test's own copy of the finished experiment's storage root. The marks stay
    where they are: they are in the trials' configs, which a resumed script repeats."""
    shutil.copytree(finished / "runs", tmp_path / "copy" / "runs")
    return tmp_path / "copy"


@pytest.fixture
def no_ray_start(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Starting (or joining) Ray is an error here; the list records any attempt."""
    tried: list[str] = []

    def refuse(*args: object, **kwargs: object) -> bool:
        tried.append("ensure_ray")
        raise AssertionError("Ray was started before the journal was checked")

    monkeypatch.setattr(orchestrator.engine.raystart, "ensure_ray", refuse)
    return tried


async def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """A command, in a thread (it runs its own event loop), and what it printed."""
    status = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return status, out, err


async def resume_script(root: Path, marks: Path, fake: FakeRay) -> list[Trial]:
    """The script again, with resume=True (on the fake Ray): its calls adopt the
    journaled trials."""
    async with Orchestrator(
        storage=root / "runs", name=NAME, resume=True, progress=False, _ray_backend=fake
    ) as orch:
        trials = add_trials(orch, marks)
        assert len(orch.trials) == 3
        await orch.run()
    return trials


async def results_of(root: Path) -> dict[str, list[dict[str, Any]]]:
    async with open_storage(root / "runs" / NAME) as store:
        record = await read_experiment(store)
    assert record is not None
    return {t.id: t.results for t in record.trials}


async def test_a_truncated_head_is_named_before_ray_and_its_backup_restores_it(
    copy: Path,
    finished: Path,
    no_ray_start: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: Any,
    fake_ray: FakeRay,
) -> None:
    head = copy / "runs" / NAME / JOURNAL_KEY
    data = head.read_bytes()
    head.write_bytes(data[: len(data) // 2])
    before = await _results_via_backup(copy)
    ran = setups(finished / "marks")

    with pytest.raises(JournalDamaged) as caught:
        async with Orchestrator(storage=copy / "runs", name=NAME, resume=True, progress=False):
            pass
    message = str(caught.value)
    assert f"{head} is truncated: it ends after {len(data) // 2} bytes" in message
    assert f"python -m orchestrator repair --storage {copy / 'runs'} --name {NAME}" in message
    with pytest.raises(ExperimentExists, match="its journal is damaged .* is truncated"):
        async with Orchestrator(storage=copy / "runs", name=NAME, progress=False):
            pass
    status, _, err = await run(capsys, "resume", "--storage", str(copy / "runs"), "--name", NAME)
    assert status == 1 and "is truncated" in err and "Traceback" not in err
    assert no_ray_start == []  # every one of them answered before Ray

    status, out, err = await run(capsys, "ls", "--storage", str(copy / "runs"))
    assert status == 0, err
    (row,) = table(out, "1 experiment(s) in")
    assert row["experiment"] == NAME and row["trials"].startswith("DAMAGED: ")
    assert "experiment_state.json is truncated" in out.replace("\n", "")
    assert "python -m orchestrator repair" in out

    status, out, err = await run(capsys, "repair", "--storage", str(copy / "runs"), "--name", NAME)
    assert status == 0, err
    assert "restored the head from its backup" in out
    (aside,) = (copy / "runs" / NAME).glob("experiment_state.damaged-*.json")
    assert aside.read_bytes() == data[: len(data) // 2]  # kept, never deleted
    assert await results_of(copy) == before

    monkeypatch.undo()  # Ray may start now
    trials = await resume_script(copy, finished / "marks", fake_ray)
    assert [t.state for t in trials] == [TrialState.TERMINATED] * 3
    assert [[r["training_iteration"] for r in t.results] for t in trials] == [[1, 2, 3, 4]] * 3
    assert setups(finished / "marks") == ran  # nothing ran again


async def _results_via_backup(root: Path) -> dict[str, list[dict[str, Any]]]:
    """The results as the intact backup holds them (read through a scratch copy)."""
    scratch = root / "scratch"
    shutil.copytree(root / "runs" / NAME, scratch / NAME)
    shutil.copy(scratch / NAME / BACKUP_KEY, scratch / NAME / JOURNAL_KEY)
    async with open_storage(scratch / NAME) as store:
        record = await read_experiment(store)
    shutil.rmtree(scratch)
    assert record is not None and len(record.trials) == 3
    return {t.id: t.results for t in record.trials}


async def test_a_head_lost_with_its_backup_is_rebuilt_from_segments_and_checkpoints(
    copy: Path, finished: Path, fake_ray: FakeRay
) -> None:
    experiment = copy / "runs" / NAME
    before = await results_of(copy)
    ids = list(before)
    ran = setups(finished / "marks")
    head = experiment / JOURNAL_KEY
    text = head.read_text()
    cut = text.index(f'"id":"{ids[1]}"')  # inside the second trial's entry
    head.write_text(text[:cut])
    (experiment / BACKUP_KEY).unlink()

    async with open_storage(experiment) as store:
        report = await repair_experiment(store)
        record = await read_experiment(store)
    assert (report.action, report.whole, report.spec_lost) == ("rebuilt", 1, ids[1:])
    assert record is not None
    assert {t.id: t.results for t in record.trials} == before  # every result survived
    states = {t.id: t.state for t in record.trials}
    assert states == {ids[0]: "TERMINATED", ids[1]: "ERROR", ids[2]: "ERROR"}
    lost = record.trials[1]
    assert lost.config == {**CONFIGS[1], "marks": str(finished / "marks")}  # its params.json
    assert [c["iteration"] for c in lost.checkpoints] == [2, 4]
    assert "rebuilt by repair: its spec" in str(lost.error)

    # The same script adopts all three (the rebuilt ones by their trainable and config),
    # and their results say they are done: nothing runs again.
    trials = await resume_script(copy, finished / "marks", fake_ray)
    assert [t.id for t in trials] == ids
    assert [t.state for t in trials] == [TrialState.TERMINATED] * 3
    assert [[r["training_iteration"] for r in t.results] for t in trials] == [[1, 2, 3, 4]] * 3
    assert setups(finished / "marks") == ran


async def test_ls_and_repair_on_s3(
    finished: Path,
    moto_url: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    no_ray_start: list[str],
) -> None:
    root = f"s3://{BUCKET}/{unique_prefix()}"
    async with open_storage(root, endpoint_url=moto_url) as store:
        for path in sorted((finished / "runs" / NAME).rglob("*")):
            relative = path.relative_to(finished / "runs").as_posix()
            if path.is_file() and not any(p.startswith(".") for p in relative.split("/")):
                await store.write_bytes(relative, path.read_bytes())
        whole = await store.read_bytes(f"{NAME}/{JOURNAL_KEY}")
        await store.write_bytes(f"{NAME}/{JOURNAL_KEY}", whole[:100])
    option = ("--storage-option", f"endpoint_url={moto_url}")

    status, out, err = await run(capsys, "ls", "--storage", root, *option)
    assert status == 0, err
    (row,) = table(out, "1 experiment(s) in")
    assert row["trials"].startswith("DAMAGED: ")
    status, _, err = await run(capsys, "show", "--storage", root, "--name", NAME, *option)
    assert status == 1 and f"{root}/{NAME}/{JOURNAL_KEY} is truncated" in err
    status, out, err = await run(capsys, "repair", "--storage", root, "--name", NAME, *option)
    assert status == 0 and "restored the head from its backup" in out, err
    status, out, err = await run(capsys, "show", "--storage", root, "--name", NAME, *option)
    assert status == 0 and out.startswith(f"experiment {NAME} at {root}/{NAME}: 3 trial(s)"), out
    assert no_ray_start == []
