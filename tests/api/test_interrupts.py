"""Ctrl-C and SIGTERM in a script that uses the Python API: a clean end (actors stopped,
journal saved), one line saying how to resume, the shell's exit status, no traceback;
and the experiment resumes and finishes.

The script runs in a real subprocess with its own Ray; the signal is sent once its
trial has announced (a file) that it runs past a checkpoint.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator import Orchestrator, TrialState
from orchestrator.api.interrupts import Interrupts
from orchestrator.core.journal_format import JOURNAL_KEY

from ..support import REPO_ROOT
from ..support.journal_files import head_trials
from ..support.processes import end_tree
from ..support.trainables import assert_failure_free_history

REPO = REPO_ROOT

SCRIPT = """
import asyncio, sys
from orchestrator import Orchestrator
from tests.support.trainables import Announces

async def main() -> None:
    async with Orchestrator(storage=sys.argv[1], name="sig", progress=False, loggers=[]) as orch:
        orch.add_trial(
            Announces,
            {"delay": 0.05, "announce": sys.argv[2], "announce_at": 7},
            stop={"training_iteration": 40},
            checkpoint_every=3,
            resources={"cpu": 0.25},
        )
        await orch.run()
        print("run() returned")

asyncio.run(main())
"""


def _sigint_as_a_terminal_leaves_it() -> None:
    """The script is a user's, run from a terminal: SIGINT at its default, whatever this
    process has (a shell's background job starts with it ignored, which a script keeps:
    ``Interrupts`` never takes a signal its host ignores, and the tests here would wait
    for an interrupt that cannot come)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _start_script(
    tmp_path: Path, source: str, *args: Path, drop_ray_address: bool = True
) -> subprocess.Popen[str]:
    """``source`` as ``train.py`` in a subprocess, with ``args``; without
    ``drop_ray_address`` it inherits a ``RAY_ADDRESS`` the test session has."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source))
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(REPO)}
    if drop_ray_address:
        env.pop("RAY_ADDRESS", None)
    return subprocess.Popen(
        [sys.executable, str(script), *map(str, args)],
        cwd=tmp_path,
        env=env,
        preexec_fn=_sigint_as_a_terminal_leaves_it,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_until(
    done: Callable[[], bool], proc: subprocess.Popen[str], timeout: float, ended: str, late: str
) -> None:
    """Poll ``done`` until true; fail with ``ended`` (and the script's output) if the
    script ends first, with ``late`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the script ended before {ended}:\n{out}\n{err[-4000:]}")
        if time.monotonic() > deadline:
            pytest.fail(late)
        time.sleep(0.1)


def _wait_for_file(path: Path, proc: subprocess.Popen[str], timeout: float) -> None:
    _wait_until(
        path.exists,
        proc,
        timeout,
        "its trial ran",
        "the script's trial never reached its announcing step",
    )


def _wait_for_checkpoint(
    journal: Path, iteration: int, proc: subprocess.Popen[str], timeout: float
) -> None:
    """Until the journal lists a checkpoint of ``iteration`` or later."""
    _wait_until(
        lambda: _newest_checkpoint(journal) >= iteration,
        proc,
        timeout,
        "its checkpoint was journaled",
        f"no checkpoint of step {iteration} reached the journal",
    )


def _newest_checkpoint(journal: Path) -> int:
    try:
        trials = head_trials(journal.parent)
    except (OSError, ValueError, KeyError):
        return 0  # not written yet, or being replaced
    return max((c.get("iteration", 0) for t in trials for c in t.get("checkpoints", [])), default=0)


@pytest.mark.slow
@pytest.mark.usefixtures("ray_local")
@pytest.mark.parametrize(
    ("signum", "status"),
    # Interrupted ends Python as a Ctrl-C does: by SIGINT (130 in a shell).
    [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, 143)],
)
async def test_a_signalled_script_ends_cleanly_says_how_to_resume_and_resumes(
    tmp_path: Path, signum: int, status: int
) -> None:
    store, mark = tmp_path / "results", tmp_path / "running"
    proc = _start_script(tmp_path, SCRIPT, store, mark)
    try:
        await asyncio.to_thread(_wait_for_file, mark, proc, 150)
        # The trial ran past step 6 in its actor; its checkpoint of step 6 is journaled
        # when the driver has caught up, which on a loaded machine comes later.
        await asyncio.to_thread(_wait_for_checkpoint, store / "sig" / JOURNAL_KEY, 6, proc, 150)
        proc.send_signal(signum)
        out, err = await asyncio.to_thread(proc.communicate, timeout=120)
    finally:
        await end_tree(proc)  # its own Ray too, if it did not end
    name = signal.Signals(signum).name
    assert proc.returncode == status, err[-4000:]
    assert f"trialflow: {name}: experiment 'sig' stopped cleanly (actors stopped, journal" in err
    assert f"continue it with: python -m orchestrator resume --storage {store} --name sig" in err
    assert "Orchestrator(..., resume=True)" in err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-4000:]
    assert "SIGTERM received" not in err, err[-4000:]  # Ray's own stack dump
    assert "run() returned" not in out

    async with Orchestrator(storage=store, name="sig", resume=True, progress=False) as orch:
        (trial,) = orch.trials
        resumed_from = trial.iteration
        await asyncio.wait_for(orch.run(), 120)
    assert resumed_from >= 6  # the journal knew the checkpoint taken before the signal
    assert trial.state is TrialState.TERMINATED
    assert_failure_free_history(trial, 40)


BLOCKING_HOOK = """
import sys, time
from orchestrator import Orchestrator
from tests.support.trainables import Counter

class Blocks:
    def on_trial_result(self, trial, result):
        if result["training_iteration"] == 3:
            open(sys.argv[2], "w").close()
            time.sleep(600)  # a plain hook that blocks: a thread that cannot be stopped

orch = Orchestrator(
    storage=sys.argv[1], name="blocked", progress=False, loggers=[], hooks=[Blocks()]
)
orch.add_trial(
    Counter, {"delay": 0.05}, stop={"training_iteration": 400}, resources={"cpu": 0.25}
)
orch.run_sync()
print("run_sync() returned")
"""


@pytest.mark.slow
@pytest.mark.usefixtures("ray_local")
async def test_ctrl_c_while_a_plain_hook_blocks_abandons_it_and_says_so(tmp_path: Path) -> None:
    """The hook's thread once held the process until the hook returned (90 s in the
    issue), after a line saying "stopped cleanly": now it is abandoned after a short
    grace, named, and the process ends at once; "cleanly" is not said."""
    store, mark = tmp_path / "results", tmp_path / "blocking"
    proc = _start_script(tmp_path, BLOCKING_HOOK, store, mark)
    try:
        await asyncio.to_thread(_wait_for_file, mark, proc, 150)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        # 5 s of grace for the hook, then the actors' stop and Ray's shutdown: generous
        # for a loaded machine, and still far from the hook's 600 s.
        out, err = await asyncio.to_thread(proc.communicate, timeout=120)
        took = time.monotonic() - sent
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == -signal.SIGINT, err[-4000:]
    assert took < 120  # the hook sleeps 600 s
    assert "hook Blocks.on_trial_result for Counter_" in err
    assert "is still running; abandoned" in err
    assert "trialflow: SIGINT: experiment 'blocked' stopped (actors stopped, journal saved) " in err
    assert "but not cleanly: hook Blocks.on_trial_result for Counter_" in err
    assert "stopped cleanly" not in err
    assert "Traceback" not in err, err[-4000:]
    assert "run_sync() returned" not in out


WHILE_RAY_STARTS = """
import os, sys, time
from orchestrator import Orchestrator
from orchestrator.engine import raystart
from tests.support.trainables import Counter

def slow_start(address, **options):  # Ray's start, held until the test has signalled
    open(sys.argv[2], "w").close()
    while not os.path.exists(sys.argv[3]):
        time.sleep(0.05)
    return False  # started nothing (a cancelled real start is tests/api/test_raystart.py's)

raystart.ensure_ray = slow_start
orch = Orchestrator(storage=sys.argv[1], name="early", progress=False, loggers=[])
orch.add_trial(Counter, {}, stop={"training_iteration": 3}, resources={"cpu": 0.25})
orch.run_sync()
print("run_sync() returned")
"""


@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, 143)]
)
def test_a_signal_while_ray_starts_ends_the_driver_and_gives_the_lease_back(
    tmp_path: Path, signum: int, status: int
) -> None:
    """Ray starts in a thread (the loop renews the lease meanwhile), where Ray takes no
    SIGTERM of its own: the signal is ours from before the start, so it ends the driver
    once the start is over, with the lease given back and one line, no traceback."""
    store, starting, go = tmp_path / "results", tmp_path / "starting", tmp_path / "go"
    proc = _start_script(tmp_path, WHILE_RAY_STARTS, store, starting, go, drop_ray_address=False)
    try:
        _wait_for_file(starting, proc, 150)
        proc.send_signal(signum)
        time.sleep(0.5)  # not needed for the outcome: the signal is taken whenever it lands
        go.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.communicate()
    name = signal.Signals(signum).name
    assert proc.returncode == status, err[-4000:]
    assert f"trialflow: {name}: experiment 'early' stopped while it was starting" in err
    assert "Traceback" not in err, err[-4000:]
    assert "run_sync() returned" not in out
    assert not (store / "early" / "experiment_lease.json").exists()


async def test_signals_are_given_back_and_never_taken_from_a_host_with_its_own() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    catcher = Interrupts.catch()  # pytest-asyncio's loop runs under asyncio.Runner
    if catcher is not None:
        catcher.release()
    assert {s: signal.getsignal(s) for s in before} == before
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as IPython has it in a cell
    try:
        assert Interrupts.catch() is None
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before[signal.SIGINT])
