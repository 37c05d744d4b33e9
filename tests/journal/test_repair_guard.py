"""What ``repair`` refuses: an experiment a driver holds (its lease; ``--take-over``
takes it), a storage root that holds experiments, a path where no experiment is; in
each case it writes nothing."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import time
from pathlib import Path

import pytest

from orchestrator import Orchestrator
from orchestrator.api.lease import this_process
from orchestrator.api.repair import repair
from orchestrator.cli import main
from orchestrator.core.journal_format import JOURNAL_KEY
from orchestrator.core.lease_record import LEASE_KEY, LeaseRecord
from orchestrator.errors import ConfigError, ExperimentLocked, LeaseLost

from ..support.fakeray import FakeRay
from ..support.finished_experiment import NAME


@pytest.fixture
def root(finished: Path, tmp_path: Path) -> Path:  # noqa: F811
    """A storage root holding a copy of the finished experiment."""
    shutil.copytree(finished / "runs", tmp_path / "runs")
    return tmp_path / "runs"


def tree(path: Path) -> dict[str, bytes]:
    """Every file below ``path`` (hidden ones too) and its bytes."""
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


async def command(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return status, out, err


async def test_repair_is_refused_while_a_driver_holds_the_lease(
    root: Path, fake_ray: FakeRay, capsys: pytest.CaptureFixture[str]
) -> None:
    experiment = root / NAME
    # Taken over, the driver loses its lease at its next renewal (if the test gets
    # that far first, leaving raises LeaseLost: what a taken-over driver must do).
    with contextlib.suppress(LeaseLost):
        await _hold_and_repair(root, experiment, fake_ray, capsys)


async def _hold_and_repair(
    root: Path, experiment: Path, fake_ray: FakeRay, capsys: pytest.CaptureFixture[str]
) -> None:
    async with Orchestrator(
        storage=root, name=NAME, resume=True, progress=False, _ray_backend=fake_ray
    ):
        holder = LeaseRecord.from_json((experiment / LEASE_KEY).read_bytes()).holder
        with pytest.raises(ExperimentLocked, match=r"take_over=True \(command line: --take-over\)"):
            await repair(root, NAME)
        status, out, err = await command(capsys, "repair", "--storage", str(root), "--name", NAME)
        assert status == 1 and "error: " in err and "--take-over" in err, out + err
        assert "Traceback" not in err
        # Nothing written (the driver's own journal writes go on): no head kept aside,
        # the lease still the driver's.
        assert not list(experiment.glob("experiment_state.damaged-*"))
        assert LeaseRecord.from_json((experiment / LEASE_KEY).read_bytes()).holder == holder

        status, out, err = await command(
            capsys, "repair", "--storage", str(root), "--name", NAME, "--take-over"
        )
        assert status == 0, out + err
        assert "reads whole" in out
        assert not (experiment / LEASE_KEY).exists()  # taken, then given back


async def test_repair_takes_the_lease_of_a_driver_that_died(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The usual case: the driver crashed and left its lease (fresh, but its process
    is gone): repair takes it without --take-over, and gives it back."""
    experiment = root / NAME
    dead = dataclasses.replace(this_process("dead"), pid=2**22 + 7, started="1")
    now = time.time()
    (experiment / LEASE_KEY).write_bytes(LeaseRecord(dead, now, now, 30.0).to_json())
    status, out, err = await command(capsys, "repair", "--storage", str(root), "--name", NAME)
    assert status == 0 and "reads whole" in out, out + err
    assert not (experiment / LEASE_KEY).exists()


async def test_repair_refuses_a_storage_root_that_holds_experiments(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tree(root.parent)
    status, out, err = await command(
        capsys, "repair", "--storage", str(root.parent), "--name", root.name
    )
    assert status == 2, out + err
    assert f"{root} is not an experiment: it holds 1 experiment(s) ({NAME})" in err
    assert f"--storage {root} --name <one of them>" in err
    assert tree(root.parent) == before  # no journal, no lease written into the root
    assert not (root / JOURNAL_KEY).exists()
    status, out, err = await command(capsys, "ls", "--storage", str(root))
    assert status == 0 and "1 experiment(s) in" in out, out + err

    # Refused too when an earlier repair of the root left a journal there.
    (root / JOURNAL_KEY).write_text('{"format":2,"segments":[],"trials":[]}')
    status, out, err = await command(
        capsys, "repair", "--storage", str(root.parent), "--name", root.name
    )
    assert status == 2 and "is not an experiment: it holds 1 experiment(s)" in err, out + err


async def test_repair_where_no_experiment_is_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = await command(
        capsys, "repair", "--storage", str(tmp_path / "nowhere"), "--name", NAME
    )
    assert status == 2 and "no experiment at" in err, err
    assert not (tmp_path / "nowhere").exists()  # not even the directory

    empty = tmp_path / "runs" / NAME
    empty.mkdir(parents=True)
    (empty / "notes.txt").write_text("not an experiment")
    status, _, err = await command(
        capsys, "repair", "--storage", str(tmp_path / "runs"), "--name", NAME
    )
    assert status == 2 and f"no experiment at {empty}" in err, err
    assert os.listdir(empty) == ["notes.txt"]
    with pytest.raises(ConfigError, match="no experiment at"):
        await repair(tmp_path / "runs", NAME)
