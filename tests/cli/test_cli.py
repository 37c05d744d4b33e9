"""``python -m orchestrator demo`` and ``run``, end to end, each in its own process;
the CLI package's layout (help, old module paths, what the demo's workers import) and
its one Ray start-up (``orchestrator.engine.raystart``).

The end-to-end tests start their own private Ray in a subprocess (as a user would), so
they never touch the session cluster of ``conftest.py``. Argument errors are checked
in-process: they must be reported before Ray starts. ``ls``, ``show`` and ``plot`` are
in ``test_cli_inspect.py``.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from orchestrator.cli import COMMANDS, expand_grid, main, ray_session
from orchestrator.cli.demo import DemoOptions
from orchestrator.cli.demo_model import CHECKPOINT_FILE, DigitsMLP, load_digits_split
from orchestrator.engine.raystart import LOCAL_RAY_ATTEMPTS, RayStartError, ensure_ray
from orchestrator.errors import ConfigError

from ..support import REPO_ROOT
from ..support.journal_files import unseal
from ..support.processes import kill_tree

REPO = REPO_ROOT

TINY_TRAINABLE = """
import json
import os

from orchestrator import Trainable


class Counter(Trainable):
    def setup(self, config):
        self.value = 0.0
        self.rate = float(config["rate"])

    def step(self):
        self.value += self.rate
        return {"score": self.value}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "state.json"), "w") as fh:
            json.dump({"value": self.value}, fh)

    def load_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "state.json")) as fh:
            self.value = json.load(fh)["value"]
"""


def _run_cli(*args: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.update(
        RAY_AUTH_MODE="disabled",
        RAY_USAGE_STATS_ENABLED="0",
        PYTHONIOENCODING="utf-8",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
    )
    env.pop("RAY_ADDRESS", None)  # a private local Ray, whatever else runs here
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:  # timed out: its Ray goes with it
            kill_tree(proc.pid)
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _table(stdout: str, title: str) -> list[dict[str, str]]:
    """The rows, as ``{column: cell}`` in printed order, of the table titled ``title``."""
    _, sep, tail = stdout.partition(title)
    assert sep, f"no table {title!r} in the output:\n{stdout}"
    header: list[str] = []
    rows: list[dict[str, str]] = []
    for line in tail.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃|]", line)[1:-1]]
        if not header and "trial" in cells:
            header = cells
        elif header and len(cells) == len(header):
            rows.append(dict(zip(header, cells, strict=True)))
        elif header and rows and not line.startswith(("└", "+", "-")):
            break
    return rows


@pytest.mark.slow
def test_demo_sweep_recovers_a_killed_actor(tmp_path: Path) -> None:
    iterations = 12
    proc = _run_cli(
        "demo",
        "--trials",
        "4",
        "--iterations",
        str(iterations),
        "--no-live",
        "--storage",
        str(tmp_path),
        "--name",
        "sweep",
        cwd=tmp_path,
        timeout=170,
    )
    out = proc.stdout
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{proc.stderr}"

    rows = {row["trial"]: row for row in _table(out, "final:")}
    assert sorted(rows) == [f"trial_{i:02d}" for i in range(4)], out
    for row in rows.values():
        assert row["state"] == "TERMINATED", out
        assert row["iter"] == f"{iterations}/{iterations}", out

    # One failure, shown as it happened, then the recovery, and counted in the table.
    failure = re.search(r"(trial_\d\d): failure 1: .*died", out)
    assert failure is not None, out
    victim = failure.group(1)
    recovery = re.search(
        rf"{victim}: actor killed at iteration (\d+) -> restored from checkpoint at "
        r"iteration (\d+)",
        out,
    )
    assert recovery is not None, out
    killed_at, restored_at = map(int, recovery.groups())
    assert 0 < restored_at <= killed_at
    assert {t: row["failures"] for t, row in rows.items()} == {
        t: "1" if t == victim else "0" for t in rows
    }, out
    assert "4/4 trials TERMINATED; 1 failure(s), 1 recovered" in out

    # Best first: the accuracies in the final table never increase going down.
    accuracies = [float(row["val acc"]) for row in rows.values()]
    assert accuracies == sorted(accuracies, reverse=True), out

    # The checkpoints are real .npz files in the experiment's storage.
    saved = list((tmp_path / "sweep").rglob(CHECKPOINT_FILE))
    assert saved, f"no {CHECKPOINT_FILE} under {tmp_path / 'sweep'}"
    with np.load(saved[0]) as npz:
        assert "param_0" in npz.files


@pytest.mark.slow
def test_run_a_trainable_from_an_import_path(tmp_path: Path, ray_cluster: Any) -> None:
    (tmp_path / "tinytrain.py").write_text(textwrap.dedent(TINY_TRAINABLE))
    proc = _run_cli(
        "run",
        "tinytrain:Counter",
        "--config",
        '{"rate": 1}',
        "--grid",
        '{"rate": [1, 2]}',
        "--stop",
        "training_iteration=3",
        "--checkpoint-every",
        "1",
        "--cpu",
        "0.25",
        "--trials-per-worker",
        "2",
        "--storage",
        str(tmp_path / "results"),
        "--name",
        "tiny",
        "--metric",
        "score",
        cwd=tmp_path,
        timeout=120,
    )
    out = proc.stdout
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{proc.stderr}"
    assert "2/2 trials TERMINATED" in out
    rows = _table(out, "final results")
    assert [(r["config"], r["state"], r["iter"], r["score"]) for r in rows] == [
        ('{"rate": 2}', "TERMINATED", "3", "6"),  # best score first
        ('{"rate": 1}', "TERMINATED", "3", "3"),
    ], out
    assert list((tmp_path / "results" / "tiny").rglob("state.json"))
    # The finished experiment resumes as a no-op: nothing is re-run (on the session's
    # cluster: the run above started a Ray of its own already). Finished trials need no
    # code: it resumes where tinytrain cannot be imported...
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    resume = ("resume", "--storage", str(tmp_path / "results"), "--name", "tiny")
    resume += ("--address", ray_cluster.address)
    proc = _run_cli(*resume, "--metric", "score", cwd=elsewhere, timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "resuming" in proc.stdout and "2 TERMINATED" in proc.stdout
    assert "started" not in proc.stdout
    assert "2/2 trials TERMINATED" in proc.stdout
    # ...but a trial that is to run again does, and says where it looked.
    journal = tmp_path / "results" / "tiny" / "experiment_state.json"
    doc = unseal(journal.parent)  # every entry in the head (format 3 seals them)
    doc["trials"][0]["state"] = "RUNNING"
    journal.write_text(json.dumps(doc))
    proc = _run_cli(*resume, cwd=elsewhere, timeout=120)
    assert proc.returncode == 2, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "module 'tinytrain'" in proc.stderr and "PYTHONPATH" in proc.stderr
    assert "Traceback" not in proc.stderr


LONG_TRAINABLE = """
import time

from orchestrator import Trainable


class Slow(Trainable):
    def step(self):
        time.sleep(0.2)
        return {"x": 1}
"""


def _block_sigint() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


#: Popen's preexec_fn: the child starts with SIGINT as this process has it, blocked (as a
#: child of Ray's processes has it), or ignored (as a shell's background job has it).
SIGINT_AT_START: dict[str, Callable[[], None] | None] = {
    "as is": None,
    "blocked": _block_sigint,
    "ignored": _ignore_sigint,
}


@pytest.mark.slow
@pytest.mark.parametrize("inherited", list(SIGINT_AT_START))
def test_an_interrupted_run_says_how_to_resume_it(
    tmp_path: Path, inherited: str, ray_cluster: Any
) -> None:
    """With SIGINT as the user's shell leaves it, the run starts its own Ray (and stops
    it on the way out); with SIGINT blocked or ignored it joins the session's cluster:
    what it inherited is set right at the top of ``python -m orchestrator``, before any
    Ray, and a private Ray more would only cost seconds."""
    (tmp_path / "slowtrain.py").write_text(textwrap.dedent(LONG_TRAINABLE))
    store = tmp_path / "results"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(REPO)}
    env.pop("RAY_ADDRESS", None)
    address = [] if inherited == "as is" else ["--address", ray_cluster.address]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "run",
            "slowtrain:Slow",
            "--cpu",
            "0.25",
            "--stop",
            "training_iteration=100000",
            "--storage",
            str(store),
            "--name",
            "slow",
            *address,
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=SIGINT_AT_START[inherited],
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "started" in line:
                break
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # the CLI dumps its threads' stacks
            time.sleep(2)
            kill_tree(proc.pid)
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"the run went on after SIGINT; its stacks:\n{err[-6000:]}")
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)  # with the Ray it started
        proc.wait()
    assert proc.returncode == 130, err
    assert f"continue it with: python -m orchestrator resume --storage {store} --name slow" in err


def test_resume_without_a_journal_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["resume", "--storage", str(tmp_path), "--name", "nothing"]) == 2
    assert "no experiment journal at" in capsys.readouterr().err


def test_run_bad_import_path_exits_non_zero_with_a_clear_error(tmp_path: Path) -> None:
    proc = _run_cli(
        "run", "no_such_module:Thing", "--stop", "training_iteration=1", cwd=tmp_path, timeout=60
    )
    assert proc.returncode == 2
    assert "trialflow run: error: trainable 'no_such_module:Thing': cannot import module" in (
        proc.stderr
    )
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["json:JSONDecoder", "--stop", "a=1"], "is neither a subclass of orchestrator.Trainable"),
        (["orchestrator.cli.demo_model:Nope", "--stop", "a=1"], "has no 'Nope'"),
        (["orchestrator.cli.demo_model:DigitsMLP"], "give at least one --stop"),
        (["orchestrator.cli.demo_model:DigitsMLP", "--stop", "iters"], "expected METRIC=NUMBER"),
        (
            ["orchestrator.cli.demo_model:DigitsMLP", "--config", "{bad", "--stop", "a=1"],
            "--config is not valid JSON",
        ),
        (
            ["orchestrator.cli.demo_model:DigitsMLP", "--grid", '{"lr": 0.1}', "--stop", "a=1"],
            "'lr' must map to a non-empty list",
        ),
        (
            ["orchestrator.cli.demo_model:DigitsMLP", "--stop", "a=1", "--max-failures", "-5"],
            "max_failures must be an int >= -1",
        ),
    ],
)
def test_run_argument_errors_before_ray_starts(
    args: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ray

    def no_ray(*args: object, **kwargs: object) -> None:
        raise AssertionError("Ray was started for a command with bad arguments")

    # Whatever the session's Ray state, a bad argument must be caught before ray.init.
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", no_ray)
    assert main(["run", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trialflow run: error: ")
    assert message in err


def test_run_rejects_a_non_positive_trials_per_worker(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "x:Y", "--stop", "a=1", "--trials-per-worker", "0"])
    assert exit_info.value.code == 2
    assert "--trials-per-worker: must be an integer >= 1" in capsys.readouterr().err


def test_expand_grid() -> None:
    assert expand_grid({"a": 1}, None) == [{"a": 1}]
    assert expand_grid({"a": 1}, {"b": [1, 2], "c": ["x"]}) == [
        {"a": 1, "b": 1, "c": "x"},
        {"a": 1, "b": 2, "c": "x"},
    ]
    assert expand_grid({"a": 1}, [{"a": 2}, {"b": 3}]) == [{"a": 2}, {"a": 1, "b": 3}]
    with pytest.raises(ConfigError, match="JSON object of lists"):
        expand_grid({}, 3)


@pytest.mark.parametrize("iterations", [1, 2, 4, 8, 12, 30, 100])
def test_demo_kills_after_a_checkpoint_and_before_the_end(iterations: int) -> None:
    options = DemoOptions(iterations=iterations)
    assert 1 <= options.every
    if iterations >= 4:
        assert options.every < options.kill_at < iterations
        assert options.kill_at % options.every != 0  # the restore rolls back some work


def test_digits_mlp_resumes_exactly_from_its_checkpoint(tmp_path: Path) -> None:
    config = {"lr": 0.1, "hidden": 16, "epochs_per_iter": 1}

    def fresh(seed: int) -> DigitsMLP:
        model = DigitsMLP()
        model.trial_id = "t"
        model.setup({**config, "seed": seed})
        return model

    model = fresh(seed=0)
    for _ in range(2):
        model.step()
    model.save_checkpoint(str(tmp_path))
    expected = [model.step() for _ in range(2)]

    resumed = fresh(seed=7)  # other weights and RNG until the load
    resumed.load_checkpoint(str(tmp_path))
    assert [resumed.step() for _ in range(2)] == expected
    assert expected[-1]["val_accuracy"] > 0.8


def test_digits_split_is_cached_and_identical(tmp_path: Path) -> None:
    first = load_digits_split(cache_dir=str(tmp_path))
    assert len(list(tmp_path.glob("trialflow-digits-*.npz"))) == 1
    again = load_digits_split(cache_dir=str(tmp_path))
    assert [a.shape for a in first] == [(1438, 64), (1438,), (359, 64), (359,)]
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)


# -- the package ------------------------------------------------------------------------


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_of_every_command(command: str | None, tmp_path: Path) -> None:
    proc = _run_cli(*([command] if command else []), "--help", cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: python -m orchestrator {command or ''}".rstrip())
    if command is None:
        for name in COMMANDS:
            assert f"    {name} " in proc.stdout
    else:
        description = " ".join(COMMANDS[command][0].split())
        assert description in " ".join(proc.stdout.split())


def test_the_demos_old_path_still_loads_what_journals_name() -> None:
    """Journals record trainables by import path and pickles name their module: an
    experiment from before the model moved resumes and unpickles (through the table of
    moved names; no module is left at the old path)."""
    from orchestrator.core import moved
    from orchestrator.core.codec import import_class

    assert import_class("orchestrator.demo_model:DigitsMLP") is DigitsMLP
    assert moved.loads(b"corchestrator.demo_model\nDigitsMLP\n.") is DigitsMLP
    assert moved.loads(b"corchestrator.demo_model\nload_digits_split\n.") is load_digits_split
    # The demo's runner was never named by a journal: its old flat path is gone.
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("orchestrator.demo")


def test_a_demo_worker_loads_no_driver_machinery_with_its_trainable() -> None:
    """Each demo trial worker imports ``orchestrator.cli.demo_model`` (and so the CLI
    package): that must not load the CLI's commands' machinery as well."""
    driver_only = [
        "orchestrator.engine.loop",
        "orchestrator.journal.writer",
        "orchestrator.views.experiments",
        "orchestrator.api.orchestrator",
        "orchestrator.cli.demo",
        "storage",
        "rich",
    ]
    probe = (
        "import json, sys\n"
        "import orchestrator.cli.demo_model\n"
        f"print(json.dumps([m for m in {driver_only!r} if m in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


# -- one Ray start-up ----------------------------------------------------------------------


class FakeRay:
    """``ray.init``/``shutdown`` recorded; ``init`` raises the queued errors first."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *errors: BaseException) -> None:
        import ray

        self.calls: list[Any] = []
        self.errors = list(errors)
        self.up = False
        monkeypatch.setattr(ray, "is_initialized", lambda: self.up)
        monkeypatch.setattr(ray, "init", self.init)
        monkeypatch.setattr(ray, "shutdown", lambda: self.calls.append("shutdown"))
        monkeypatch.delenv("RAY_ADDRESS", raising=False)

    def init(self, **options: Any) -> None:
        self.calls.append(options)
        if self.errors:
            raise self.errors.pop(0)


def test_a_private_local_ray_by_default_with_the_env_set_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ray = FakeRay(monkeypatch)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.delenv("TRIALFLOW_TEST_VAR", raising=False)
    assert ensure_ray(None, num_cpus=3, log_to_driver=False, env={"TRIALFLOW_TEST_VAR": "1"})
    (options,) = ray.calls
    assert options["address"] == "local" and options["include_dashboard"] is False
    assert (options["num_cpus"], options["log_to_driver"]) == (3, False)
    assert os.environ["TRIALFLOW_TEST_VAR"] == "1"
    assert os.environ["RAY_AUTH_MODE"] == "disabled"


def test_an_initialised_ray_is_used_and_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    ray = FakeRay(monkeypatch)
    ray.up = True
    monkeypatch.delenv("TRIALFLOW_TEST_VAR", raising=False)
    assert ensure_ray("auto", env={"TRIALFLOW_TEST_VAR": "1"}) is False
    with ray_session(None):
        pass
    assert ray.calls == []
    assert "TRIALFLOW_TEST_VAR" not in os.environ


def test_an_address_or_ray_address_joins_and_a_bad_one_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ray = FakeRay(monkeypatch, ConnectionError("refused"), ValueError("bad address"))
    with pytest.raises(ConfigError, match="cannot connect to Ray at 'host:6379': refused"):
        ensure_ray("host:6379")
    monkeypatch.setenv("RAY_ADDRESS", "elsewhere:1")
    with pytest.raises(ConfigError, match="cannot connect to Ray at 'elsewhere:1'"):
        ensure_ray(None)
    assert [c["address"] for c in ray.calls] == ["host:6379", None]  # None: Ray reads the env
    assert ensure_ray(None) is True
    assert "include_dashboard" not in ray.calls[-1]  # joining: the cluster's own choice


def test_a_local_start_that_times_out_is_retried_once(monkeypatch: pytest.MonkeyPatch) -> None:
    ray = FakeRay(monkeypatch, Exception("timed out"))
    with ray_session(None):
        assert [c if c == "shutdown" else "init" for c in ray.calls] == [
            "init",
            "shutdown",
            "init",
        ]
    assert ray.calls[-1] == "shutdown"  # started here: shut down on the way out

    ray = FakeRay(monkeypatch, *(Exception("timed out") for _ in range(LOCAL_RAY_ATTEMPTS)))
    with pytest.raises(RayStartError, match=rf"after {LOCAL_RAY_ATTEMPTS} attempt\(s\)"):
        ensure_ray(None)
    ray = FakeRay(monkeypatch, Exception("no cluster there"))
    with pytest.raises(RayStartError, match="could not join Ray at 'auto'"):
        ensure_ray("auto")  # joining is not retried
    assert len([c for c in ray.calls if c != "shutdown"]) == 1


SWEEP_TRAINABLE = """
import json
import os
import time

from orchestrator import Trainable
from tests.support.trainables import pass_gate


class Quad(Trainable):
    def setup(self, config):
        self.n = 0
        with open(os.path.join(config["marks"], self.trial_id), "a") as fh:
            fh.write("x")

    def step(self):
        if self.n == 0:
            pass_gate(self.config.get("gate"), 2, self.trial_id)
        time.sleep(self.config.get("delay", 0.0))
        self.n += 1
        return {"score": -((self.config["x"] - 0.5) ** 2), "n": self.n}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "n.json"), "w") as fh:
            json.dump(self.n, fh)

    def load_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "n.json")) as fh:
            self.n = json.load(fh)
"""


@pytest.mark.slow
def test_a_sweep_from_the_command_line_resumes_after_its_driver_is_killed(
    tmp_path: Path,
) -> None:
    from ..support.drivers import kill_with_its_ray, read_journal

    (tmp_path / "quad.py").write_text(textwrap.dedent(SWEEP_TRAINABLE))
    marks, gate = tmp_path / "marks", tmp_path / "gate"  # 2 trials pass, the next wait
    marks.mkdir()
    gate.mkdir()
    store = tmp_path / "results"
    space = json.dumps(
        {"x": {"uniform": [0, 1]}, "marks": str(marks), "delay": 0.1, "gate": str(gate)}
    )
    command = [
        "run",
        "quad:Quad",
        "--space",
        space,
        "--num-samples",
        "6",
        "--metric",
        "score",
        "--mode",
        "max",
        "--max-concurrent",
        "2",
        "--stop",
        "training_iteration=8",
        "--checkpoint-every",
        "2",
        "--cpu",
        "0.25",
        "--seed",
        "1",
        "--storage",
        str(store),
        "--name",
        "sw",
    ]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(REPO)}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *command],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    journal = store / "sw" / "experiment_state.json"
    try:
        # The kill lands once the 2 trials let through have ended and the 2 after them
        # (--max-concurrent) are held at their first step: the sweep cannot end first.
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            time.sleep(0.1)
            assert proc.poll() is None, "the driver exited while its trials were held"
            trials = read_journal(journal) or {}
            done = [t for t in trials.values() if t["state"] == "TERMINATED"]
            if len(done) == 2 and len(list(gate.glob("*.held"))) == 2:
                break
        else:
            pytest.fail("the sweep made no progress")
    finally:
        kill_with_its_ray(proc)  # type: ignore[arg-type]
    (gate / "open").touch()
    before = read_journal(journal) or {}
    finished_before = {t["id"] for t in before.values() if t["state"] == "TERMINATED"}
    assert len(finished_before) == 2
    # On a Ray of its own (new node ids): the session's cluster would start its workers
    # in this test's directory, where `tests` (the trainable's module) does not import.
    proc = _run_cli(
        "resume",
        "--storage",
        str(store),
        "--name",
        "sw",
        "--metric",
        "score",
        cwd=tmp_path,
        timeout=240,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "continuing sweep 'sweep'" in proc.stdout
    assert "6/6 trials TERMINATED" in proc.stdout and "best trial sweep_" in proc.stdout
    assert sorted(p.name for p in marks.iterdir()) == [f"sweep_{i:05d}" for i in range(6)]
    for trial_id in finished_before:  # the trials finished before the kill ran once
        assert (marks / trial_id).read_text() == "x", trial_id
