"""``ls``, ``show`` and ``plot``, in-process: on a finished local experiment (one real
run for the module), on the same experiment in a moto S3 bucket, on heads edited to
carry a sweep and PBT lineage, and their errors. None of them may start Ray or import
the trials' code."""

from __future__ import annotations

import asyncio
import base64
import builtins
import json
import logging
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import matplotlib.image
import pytest

from orchestrator.cli import main
from orchestrator.cli.present import cell, time_text
from orchestrator.core.journal_format import JOURNAL_KEY, SEGMENTS_PREFIX
from storage import open_storage

from ..support.journal_files import unseal
from ..support.journal_heads import (
    MARKER_MODULE,
    MARKER_SOURCE,
    entry,
    rows,
    run_tiny_experiment,
    segment,
)
from ..support.journal_heads import write_head as write_experiment
from ..support.rich_tables import table
from ..support.servers import BUCKET, aws_env, moto_url, unique_prefix  # noqa: F401

NAME = "tiny"


@pytest.fixture(scope="module")
async def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A storage root holding one finished experiment, ``tiny`` (see
    ``run_tiny_experiment``: 2 TERMINATED, 1 ERROR, run on the fake Ray)."""
    root = tmp_path_factory.mktemp("results")
    await run_tiny_experiment(root, NAME)
    return root


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables wide enough that no cell wraps (rich reads COLUMNS)."""
    monkeypatch.setenv("COLUMNS", "300")


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("an inspection command started Ray")

    monkeypatch.setattr(ray, "init", refuse)


def head(root: Path, name: str = NAME) -> dict[str, Any]:
    """The head, every trial's entry in it (the sealed ones put back: ``unseal``)."""
    return unseal(root / name)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


# -- ls --------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_ray")
def test_ls_lists_the_finished_experiment(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(capsys, "ls", "--storage", str(results))
    assert status == 0, err
    written = head(results)["written_at"]
    started = head(results).get("started_at", written)
    assert table(out, f"1 experiment(s) in {results}") == [
        {
            "experiment": NAME,
            "trials": "2 TERMINATED, 1 ERROR",
            "started": time_text(started),
            "updated": time_text(written),
        }
    ]  # no sweep: no "best" column


def test_ls_of_an_empty_storage_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "not-an-experiment").mkdir()
    status, out, err = run(capsys, "ls", "--storage", str(tmp_path))
    assert (status, err) == (0, "")
    assert out.strip() == f"no experiments in {tmp_path}"


def test_log_lines_go_to_stderr_and_stdout_holds_the_output_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """So ``trialflow ... | jq`` (or ``> file``) gets only the command's output."""
    status, out, err = run(capsys, "-v", "ls", "--storage", str(tmp_path))
    logging.getLogger("orchestrator.journal").info("a line the orchestrator logs")
    logging.getLogger("orchestrator.journal").warning("a warning it logs")
    out_after, err = capsys.readouterr()
    assert status == 0 and out + out_after == f"no experiments in {tmp_path}\n"
    assert "a line the orchestrator logs" in err and "a warning it logs" in err


def test_ls_of_a_storage_that_does_not_exist_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(capsys, "ls", "--storage", str(tmp_path / "nowhere"))
    assert status == 2
    assert err == f"trialflow ls: error: no directory {tmp_path / 'nowhere'}; check --storage\n"


# -- show ------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_ray")
def test_show_has_a_row_per_trial_best_first(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(
        capsys, "show", "--storage", str(results), "--name", NAME, "--metric", "score"
    )
    assert status == 0, err
    assert out.startswith(f"experiment {NAME} at {results / NAME}: 3 trial(s) (2 TERMINATED")
    entries = {e["id"]: e for e in head(results)["trials"]}
    got = table(out, "trials, best score (max) first")
    # steady and recovers end at count 6 (score 6.0), fails at 1: a stable sort
    assert [r["trial"] for r in got] == ["steady", "recovers", "fails"]
    for row in got:
        journaled = entries[row["trial"]]
        assert row["config"] == json.dumps(journaled["config"])
        assert row["state"] == journaled["state"]
        assert row["iter"] == str(journaled["iteration"])
        assert row["failures"] == str(journaled["num_failures"])
        assert row["ckpts"] == str(len(journaled["checkpoints"]))
        assert row["score"] == cell(journaled["last_result"]["score"])
    assert [r["ckpts"] for r in got] == ["3", "2", "0"]
    assert [r["failures"] for r in got] == ["0", "1", "1"]
    # the error, without its "trial fails: " prefix: the line names the trial already
    assert re.search(r"^fails: ERROR: (?!trial fails).*planned failure at 2$", out, re.M), out
    assert "PBT exploits" not in out


@pytest.mark.usefixtures("no_ray")
def test_show_and_ls_rank_by_the_sweep_and_show_its_lineage(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A head as a PBT run writes it: a sweep with a metric, mode and lineage, and a
    trial whose config an exploit changed."""
    shutil.copytree(results / NAME, tmp_path / NAME)
    doc = head(tmp_path)
    doc["sweeps"] = [
        {
            "name": "pbt",
            "metric": "score",
            "mode": "min",
            "trials": ["steady", "recovers", "fails"],
            "lineage": [
                {
                    "trial_id": "recovers",
                    "time": 4,
                    "donor_id": "steady",
                    "donor_checkpoint_iteration": 4,
                    "old_config": {"lr": 0.1, "seed": 1},
                    "new_config": {"lr": 0.2, "seed": 1, "wd": 0.01},
                }
            ],
        }
    ]
    doc["trials"][1]["config_now"] = {"lr": 0.2, "seed": 1, "wd": 0.01}
    (tmp_path / NAME / JOURNAL_KEY).write_text(json.dumps(doc))

    status, out, err = run(capsys, "show", "--storage", str(tmp_path), "--name", NAME)
    assert status == 0, err
    got = table(out, "trials, best score (min) first")
    assert [r["trial"] for r in got] == ["fails", "steady", "recovers"]
    assert got[2]["config"] == '{"lr": 0.2, "seed": 1, "wd": 0.01}'  # what it ended with
    assert table(out, "PBT exploits") == [
        {
            "trial": "recovers",
            "at": "4",
            "donor": "steady",
            "donor ckpt": "4",
            "changed": "lr: 0.1 -> 0.2, wd: - -> 0.01",
        }
    ]

    status, out, err = run(capsys, "ls", "--storage", str(tmp_path))
    assert status == 0, err
    (row,) = table(out, "experiment(s) in")
    assert row["best"] == "score=1 (min, fails)"


def test_show_of_a_missing_experiment_names_where_it_looked(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = run(capsys, "show", "--storage", str(results), "--name", "nope")
    assert status == 2
    assert err.startswith(f"trialflow show: error: no experiment at {results / 'nope'} ")
    assert "python -m orchestrator ls" in err


def test_a_metric_no_trial_reported_names_the_ones_they_did(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in ("show", "plot"):
        argv = (command, "--storage", str(results), "--name", NAME, "--metric", "accuracy")
        status, out, err = run(capsys, *argv)
        assert status == 2, out
        assert f"trialflow {command}: error: no trial of {NAME} reported the metric " in err
        assert "'accuracy'" in err and "count" in err and "score" in err


# -- while a driver runs the experiment ------------------------------------------------


@pytest.mark.usefixtures("no_ray")
async def test_inspection_leaves_a_running_drivers_lease_alone(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ls``, ``show`` and ``plot`` read; they never take (or touch) the lease of the
    driver that runs the experiment."""
    from orchestrator import Orchestrator
    from orchestrator.api.lease import acquire_lease
    from orchestrator.core.lease_record import LEASE_KEY, LeaseRecord

    lease = await acquire_lease(Orchestrator(storage=results, name=NAME, resume=True)._exp)
    try:
        plot = ["plot", "--storage", str(results), "--name", NAME, "--metric", "score"]
        for argv in (
            ["ls", "--storage", str(results)],
            ["show", "--storage", str(results), "--name", NAME],
            [*plot, "-o", str(tmp_path / "p.png")],
        ):
            status, out, err = await asyncio.to_thread(run, capsys, *argv)
            assert status == 0, (argv, err)
        stored = LeaseRecord.from_json((results / NAME / LEASE_KEY).read_bytes())
        assert stored.holder == lease.holder
        assert lease.may_write() and lease.lost is None
    finally:
        await lease.release()


# -- plot ------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_ray")
def test_plot_writes_a_png(
    results: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    status, out, err = run(
        capsys, "plot", "--storage", str(results), "--name", NAME, "--metric", "score"
    )
    assert status == 0, err
    path = tmp_path / f"{NAME}-score.png"
    assert out.strip() == f"wrote {path}"
    image = matplotlib.image.imread(path)
    assert image.shape == (550, 900, 4)  # the figure's 9 x 5.5 inches at 100 dpi
    assert image[..., :3].std() > 0.05  # lines drawn, not a blank canvas

    chosen = tmp_path / "out" / "picture.png"
    chosen.parent.mkdir()
    argv = ["plot", "--storage", str(results), "--name", NAME, "--metric", "count", "-o"]
    status, out, err = run(capsys, *argv, str(chosen))
    assert (status, out.strip()) == (0, f"wrote {chosen}"), err
    assert matplotlib.image.imread(chosen).shape == (550, 900, 4)

    status, _, err = run(capsys, *argv, str(tmp_path / "missing" / "p.png"))
    assert status == 2
    assert "its directory does not exist" in err


def test_plot_without_matplotlib_says_what_to_install(
    results: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("matplotlib"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    argv = ("plot", "--storage", str(results), "--name", NAME, "--metric", "score")
    status, _, err = run(capsys, *argv, "-o", str(tmp_path / "p.png"))
    assert status == 2
    assert "trialflow plot: error: plot needs matplotlib: pip install 'trialflow[cli]'" in err
    assert not (tmp_path / "p.png").exists()


# -- S3 --------------------------------------------------------------------------------


@pytest.fixture
async def in_s3(results: Path, moto_url: str) -> str:  # noqa: F811
    """The finished experiment copied, object by object, into a fresh S3 prefix."""
    root = f"s3://{BUCKET}/{unique_prefix()}"
    async with open_storage(root, endpoint_url=moto_url) as store:
        for path in sorted((results / NAME).rglob("*")):
            relative = path.relative_to(results).as_posix()
            if path.is_file() and not any(p.startswith(".") for p in relative.split("/")):
                await store.write_bytes(relative, path.read_bytes())
    return root


@pytest.mark.usefixtures("no_ray")
def test_ls_and_show_read_an_experiment_in_s3_as_on_disk(
    results: Path,
    in_s3: str,
    moto_url: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    option = ("--storage-option", f"endpoint_url={moto_url}")
    status, local_ls, err = run(capsys, "ls", "--storage", str(results))
    assert status == 0, err
    show = ("show", "--name", NAME, "--metric", "score")
    status, local_show, err = run(capsys, *show, "--storage", str(results))
    assert status == 0, err

    status, out, err = run(capsys, "ls", "--storage", in_s3, *option)
    assert status == 0, err
    assert table(out, f"1 experiment(s) in {in_s3}") == table(local_ls, "experiment(s) in")

    status, out, err = run(capsys, *show, "--storage", in_s3, *option)
    assert status == 0, err
    assert out.startswith(f"experiment {NAME} at {in_s3}/{NAME}: 3 trial(s)")
    title = "trials, best score (max) first"
    assert table(out, title) == table(local_show, title)
    assert len(table(out, title)) == 3

    status, _, err = run(capsys, "show", "--storage", in_s3, "--name", "nope", *option)
    assert status == 2 and f"no experiment at {in_s3}/nope " in err
    missing = f"s3://{BUCKET}-nobody-made"
    status, _, err = run(capsys, "ls", "--storage", missing, *option)
    assert status == 2 and err.startswith(f"trialflow ls: error: cannot read {missing}: ")


# -- no Ray, no code ---------------------------------------------------------------------


@pytest.mark.usefixtures("no_ray")
def test_no_command_imports_or_unpickles_the_trials_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / f"{MARKER_MODULE}.py").write_text(MARKER_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    monkeypatch.chdir(tmp_path)
    pickled = base64.b64encode(f"c{MARKER_MODULE}\nBoom\n.".encode()).decode()
    seg = f"{SEGMENTS_PREFIX}/m-000000.jsonl"
    trial = entry(
        "a",
        trainable=f"{MARKER_MODULE}:Boom",
        config_pickle=pickled,
        stop_pickle=pickled,
        results_count=2,
    )
    doc = {"format": 2, "name": "coded", "segments": [seg], "trials": [trial]}
    write_experiment(
        tmp_path / "root" / "coded",
        doc,
        {seg: segment({"trial": "a", "from": 0, "rows": rows(2.0, 1.0)})},
    )
    root = str(tmp_path / "root")
    for argv in (
        ["ls", "--storage", root],
        ["show", "--storage", root, "--name", "coded"],
        ["plot", "--storage", root, "--name", "coded", "--metric", "loss"],
    ):
        status, out, err = run(capsys, *argv)
        assert status == 0, (argv, out, err)
    assert MARKER_MODULE not in sys.modules
    assert not (tmp_path / "code" / f"{MARKER_MODULE}.imported").exists()


def test_without_storage_the_default_root_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIALFLOW_RESULTS_DIR", str(tmp_path / "default-root"))
    write_experiment(tmp_path / "default-root" / "e", {"format": 2, "trials": [entry("a")]})
    status, out, err = run(capsys, "ls")
    assert status == 0, err
    rows_ = table(out, f"1 experiment(s) in {tmp_path / 'default-root'}")
    assert [r["experiment"] for r in rows_] == ["e"]  # named by its folder: no "name"


def test_a_damaged_journal_is_reported_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_experiment(tmp_path / "ok", {"format": 2, "trials": [entry("a")]})
    (tmp_path / "damaged").mkdir()
    (tmp_path / "damaged" / JOURNAL_KEY).write_text("{not json")
    status, out, err = run(capsys, "show", "--storage", str(tmp_path), "--name", "damaged")
    assert (status, out) == (1, "")
    assert err.startswith(
        f"trialflow show: error: the journal of the experiment at {tmp_path / 'damaged'} is "
        f"damaged: {tmp_path / 'damaged' / JOURNAL_KEY} is not JSON at byte 1 of 9"
    )
    assert "Traceback" not in err
    assert "is not JSON at byte 1 of 9" in err and "python -m orchestrator repair" in err
    status, out, err = run(capsys, "ls", "--storage", str(tmp_path))  # listed, as damaged
    assert status == 0
    rows_ = {r["experiment"]: r["trials"] for r in table(out, "2 experiment(s) in")}
    assert rows_["ok"] == "1 TERMINATED"
    assert rows_["damaged"].startswith("DAMAGED: experiment_state.json is not JSON")
    assert f"repair --storage {tmp_path} --name damaged" in out.replace("\n", "")
