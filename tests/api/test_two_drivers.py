"""Two driver processes on one local experiment (issue 24, item 3): the second is
refused, naming the first; a stopped driver's lease expires and a new driver takes the
experiment over, after which the old one, woken, writes nothing and ends with
LeaseLost; a SIGKILLed driver's experiment is taken over at once by a driver of the
same machine. The drivers join the session's Ray cluster (the lease does not depend
on Ray, and a private Ray per driver would cost seconds each)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.core.lease_record import LEASE_KEY, LeaseRecord

from ..support import REPO_ROOT
from ..support.journal_files import head_trials

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.slow]

ROOT = REPO_ROOT
TTL_S = 10.0  # renewed every 3.3 s; generous for a loaded 2-core machine
STEPS = 40
#: The trial waits after this many steps until ``Drivers.fast`` exists: the first driver
#: cannot finish it before the test has stopped or killed it, however fast the machine.
HOLD_AT = 10

DRIVER = textwrap.dedent(
    """
    import asyncio, json, os, sys
    sys.path.insert(0, {root!r})
    from orchestrator import ExperimentLocked, LeaseLost, Orchestrator
    from tests.support.trainables import Counter

    async def main():
        report = {{"pid": os.getpid()}}
        try:
            async with Orchestrator(storage={storage!r}, name="exp", resume={resume!r},
                                    ray_address={address!r}, progress=False,
                                    journal_interval=0.2) as orch:
                if not {resume!r}:
                    orch.add_trial(Counter, {{"delay": 0.2, "fast_after": {fast!r},
                                            "hold_at": {hold_at}}},
                                   stop={{"training_iteration": {steps}}}, checkpoint_every=2,
                                   resources={{"cpu": 0.25}}, trial_id="t")
                trials = await orch.run()
            report["states"] = {{t.id: t.state.value for t in trials}}
            report["iterations"] = {{
                t.id: [r["training_iteration"] for r in t.results] for t in trials
            }}
        except (ExperimentLocked, LeaseLost) as err:
            import ray
            report.update(error=type(err).__name__, message=str(err), ray=ray.is_initialized())
        with open({report!r}, "w") as f:
            json.dump(report, f)

    asyncio.run(main())
    """
)


class Drivers:
    def __init__(self, tmp_path: Path, address: str) -> None:
        self.tmp = tmp_path
        self.storage = tmp_path / "store"
        self.exp = self.storage / "exp"
        self.fast = tmp_path / "fast"
        self.address = address
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "TRIALFLOW_LEASE_TTL_S": str(TTL_S)}
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, *, resume: bool) -> subprocess.Popen[bytes]:
        script = DRIVER.format(
            root=str(ROOT),
            storage=str(self.storage),
            resume=resume,
            address=self.address,
            fast=str(self.fast),
            steps=STEPS,
            hold_at=HOLD_AT,
            report=str(self.tmp / f"{name}.json"),
        )
        with open(self.tmp / f"{name}.err", "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-c", script], env=self.env, cwd=str(ROOT), stderr=err
            )
        self.procs.append(proc)
        return proc

    def stderr(self, name: str) -> str:
        return (self.tmp / f"{name}.err").read_text(errors="replace")

    def report(self, name: str) -> dict[str, Any]:
        return json.loads((self.tmp / f"{name}.json").read_text())

    def lease(self) -> LeaseRecord | None:
        try:
            return LeaseRecord.from_json((self.exp / LEASE_KEY).read_bytes())
        except (OSError, ValueError):
            return None

    def journaled_results(self) -> int:
        try:
            return int(head_trials(self.exp)[0]["results_count"])
        except (OSError, ValueError, KeyError, IndexError):
            return 0

    def snapshot(self) -> dict[str, bytes]:
        """Every file of the experiment but the lease's own."""
        return {
            str(p.relative_to(self.exp)): p.read_bytes()
            for p in self.exp.rglob("*")
            if p.is_file() and LEASE_KEY not in p.name
        }

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()


async def wait_for(what: str, check: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        await asyncio.sleep(0.1)


async def exited(proc: subprocess.Popen[bytes], timeout: float = 180.0) -> int:
    await wait_for("a driver exits", lambda: proc.poll() is not None, timeout)
    return proc.returncode


@pytest.fixture
def drivers(tmp_path: Path, ray_local: Any) -> Any:
    made = Drivers(tmp_path, ray_local.address)
    yield made
    made.stop_all()


async def test_a_second_driver_is_refused_and_a_stopped_one_is_taken_over(
    drivers: Drivers,
) -> None:
    first = drivers.start("first", resume=False)
    await wait_for("the first driver journals results", lambda: drivers.journaled_results() >= 4)
    assert first.poll() is None

    second = drivers.start("second", resume=True)
    assert await exited(second) == 0
    refused = drivers.report("second")
    assert refused["error"] == "ExperimentLocked" and refused["ray"] is False  # before Ray
    message = refused["message"]
    assert f"pid {first.pid} on host {socket.gethostname()!r}" in message
    assert "since " in message and "take_over=True" in message and "--take-over" in message

    first.send_signal(signal.SIGSTOP)  # alive, but renews nothing: a hung driver
    stopped_at = drivers.lease()
    assert stopped_at is not None and stopped_at.holder.pid == first.pid
    await wait_for(
        "the stopped driver's lease expires",
        lambda: time.time() > stopped_at.expires_at + 0.5,
        timeout=TTL_S * 4,
    )
    drivers.fast.touch()  # the trial's steps are quick from now on
    third = drivers.start("third", resume=True)
    assert await exited(third) == 0
    took = drivers.report("third")
    assert "error" not in took, took
    assert took["states"] == {"t": "TERMINATED"}
    assert took["iterations"]["t"] == list(range(1, STEPS + 1))  # one history, no splice
    holder = drivers.lease()
    assert holder is None  # released at its exit

    before = drivers.snapshot()
    first.send_signal(signal.SIGCONT)
    assert await exited(first) == 0
    woken = drivers.report("first")
    assert woken["error"] == "LeaseLost", woken
    assert "lost its lease: the lease was deleted" in woken["message"]  # the third's exit
    assert drivers.snapshot() == before  # the woken driver wrote nothing more


async def test_a_killed_drivers_experiment_is_taken_over_at_once(drivers: Drivers) -> None:
    first = drivers.start("first", resume=False)
    await wait_for("the first driver journals results", lambda: drivers.journaled_results() >= 4)
    first.kill()  # SIGKILL: its lease stays behind, fresh
    first.wait()
    left = drivers.lease()
    assert left is not None and left.holder.pid == first.pid
    drivers.fast.touch()
    started = time.time()
    second = drivers.start("second", resume=True)
    assert await exited(second) == 0
    took = drivers.report("second")
    assert "error" not in took, took
    assert took["iterations"]["t"] == list(range(1, STEPS + 1))
    # Its process is gone and this machine can see that: no wait for the lease to expire.
    assert f"took over the lease of pid {first.pid}" in drivers.stderr("second")
    assert f"its process {first.pid} is gone" in drivers.stderr("second")
    assert started < left.expires_at
