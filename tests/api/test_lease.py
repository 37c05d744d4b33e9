"""The experiment lease: its rules on plain records, then the lease itself on a local
experiment in this process (no Ray: the lease is taken before Ray starts)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator import ExperimentLocked, LeaseLost, Orchestrator
from orchestrator.api.lease import TTL_ENV, ExperimentLease, acquire_lease, this_process
from orchestrator.core.journal_format import JOURNAL_KEY
from orchestrator.core.lease_record import (
    LEASE_KEY,
    MIN_TTL_S,
    Holder,
    LeaseRecord,
    Standing,
    fence_after,
    judge,
    locked_message,
    renew_every,
    same_process_space,
)

from ..support.observe import snapshot

ME = Holder("box", 100, "alice", "mine", boot_id="b1", pid_ns="pid:[1]", started="500")
OTHER = Holder("box", 200, "bob", "theirs", boot_id="b1", pid_ns="pid:[1]", started="700")


def record(holder: Holder = OTHER, *, renewed: float = 1000.0, ttl: float = 30.0) -> LeaseRecord:
    return LeaseRecord(holder, acquired_at=renewed - 600, renewed_at=renewed, ttl=ttl)


# -- the rules -------------------------------------------------------------------------


def test_judge_free_ours_held() -> None:
    assert judge(None, me=ME, now=0, holder_alive=None).standing is Standing.FREE
    assert judge(record(ME), me=ME, now=1e9, holder_alive=None).standing is Standing.OURS
    held = judge(record(), me=ME, now=1000 + 29.9, holder_alive=None)
    assert held.standing is Standing.HELD
    # A live process that renews keeps its lease, whoever asks.
    assert judge(record(), me=ME, now=1010, holder_alive=True).standing is Standing.HELD


def test_judge_stale_by_expiry_even_if_its_process_lives() -> None:
    """A driver that stopped renewing (hung, stopped, cut off from storage) loses its
    lease after ttl, whether or not its process still runs."""
    for alive in (None, True):
        verdict = judge(record(), me=ME, now=1030, holder_alive=alive)
        assert verdict.standing is Standing.STALE
        assert "expired 0 s ago" in verdict.reason and "not renewed for 30 s" in verdict.reason


def test_judge_stale_at_once_when_its_process_is_gone() -> None:
    verdict = judge(record(), me=ME, now=1000.5, holder_alive=False)
    assert verdict.standing is Standing.STALE and "process 200 is gone" in verdict.reason


def test_pids_are_judged_only_in_one_process_space() -> None:
    assert same_process_space(ME, OTHER)
    assert not same_process_space(ME, replace(OTHER, host="other"))
    assert not same_process_space(ME, replace(OTHER, boot_id="b2"))  # rebooted
    assert not same_process_space(ME, replace(OTHER, pid_ns="pid:[2]"))  # another container
    unknown = replace(ME, boot_id=None)  # a system without /proc
    assert not same_process_space(unknown, replace(OTHER, boot_id=None))


def test_timing_rules() -> None:
    assert renew_every(30) == 10 and fence_after(30) == 20
    # A driver stops writing well before anyone may take its lease.
    assert fence_after(30) + renew_every(30) <= 30


def test_record_roundtrip_and_malformed() -> None:
    rec = record()
    assert LeaseRecord.from_json(rec.to_json()) == rec
    assert rec.renewed(1010).expires_at == 1040
    later = json.loads(rec.to_json())  # a later version's record: more fields
    later["holder"]["container"] = "abc"
    later["note"] = "x"
    assert LeaseRecord.from_json(json.dumps(later).encode()) == rec
    for bad in (b"", b"{}", b"[1]", b'{"holder": {"host": "h"}}', b"not json"):
        with pytest.raises(ValueError, match="not a lease record"):
            LeaseRecord.from_json(bad)


def test_the_locked_message_names_the_holder_and_the_ways_on() -> None:
    text = locked_message(record(), name="exp", uri="/runs/exp", now=1010)
    for part in (
        "'exp'",
        "/runs/exp",
        "pid 200",
        "host 'box'",
        "user bob",
        "since ",
        "10 min ago",
        "renewed 10 s ago",
        "in 20 s",
        "take_over=True",
        "--take-over",
    ):
        assert part in text, part


# -- the lease on a local experiment ---------------------------------------------------


@pytest.fixture
def short_ttl(monkeypatch: pytest.MonkeyPatch) -> float:
    ttl = MIN_TTL_S
    monkeypatch.setenv(TTL_ENV, str(ttl))
    return ttl


@pytest.fixture
async def leases() -> AsyncIterator[list[ExperimentLease]]:
    held: list[ExperimentLease] = []
    yield held
    for lease in held:
        await lease.release()


async def take(storage: Path, held: list[ExperimentLease], **options: object) -> ExperimentLease:
    lease = await acquire_lease(Orchestrator(storage=storage, name="exp", **options)._exp)
    held.append(lease)
    return lease


async def eventually(check: Callable[[], bool], within: float = 60.0) -> bool:
    """Whether ``check()`` holds within ``within`` seconds (asked every 50 ms)."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def stored(storage: Path) -> LeaseRecord:
    return LeaseRecord.from_json((storage / "exp" / LEASE_KEY).read_bytes())


async def test_a_second_driver_is_refused_naming_the_first(
    tmp_path: Path, leases: list[ExperimentLease]
) -> None:
    first = await take(tmp_path, leases)
    assert stored(tmp_path).holder == first.holder
    with pytest.raises(ExperimentLocked) as caught:
        await take(tmp_path, leases)
    message = str(caught.value)
    assert f"pid {os.getpid()} on host {socket.gethostname()!r}" in message
    assert "take_over=True" in message and caught.value.holder == first.holder
    assert stored(tmp_path).holder == first.holder  # untouched
    await first.release()
    assert not (tmp_path / "exp" / LEASE_KEY).exists()
    again = await take(tmp_path, leases)
    assert stored(tmp_path).holder == again.holder


async def test_a_renewed_lease_outlives_its_ttl(
    tmp_path: Path, leases: list[ExperimentLease], short_ttl: float
) -> None:
    first = await take(tmp_path, leases)
    taken = stored(tmp_path)
    for _ in range(1200):  # three renewals: more than a ttl has passed
        await asyncio.sleep(0.05)
        if stored(tmp_path).renewed_at >= taken.renewed_at + short_ttl:
            break
    assert stored(tmp_path).renewed_at >= taken.renewed_at + short_ttl
    # Fenced for a moment only if a renewal came late on a loaded machine (rightly).
    assert await eventually(first.may_write)
    with pytest.raises(ExperimentLocked):
        await take(tmp_path, leases)


async def test_take_over_stops_the_other_driver(
    tmp_path: Path, leases: list[ExperimentLease], short_ttl: float
) -> None:
    first = await take(tmp_path, leases)
    lost: list[LeaseLost] = []
    first.on_lost(lost.append)
    second = await take(tmp_path, leases, take_over=True)
    assert stored(tmp_path).holder == second.holder
    for _ in range(1200):  # the first finds out at its next renewal
        await asyncio.sleep(0.05)
        if lost:
            break
    assert lost and first.lost is lost[0] and not first.may_write()
    assert "lost its lease to pid" in str(lost[0]) and "stopped writing" in str(lost[0])
    await first.release()  # gives back nothing: the lease is not its own
    assert stored(tmp_path).holder == second.holder and await eventually(second.may_write)


async def test_an_expired_lease_of_another_machine_is_taken(
    tmp_path: Path, leases: list[ExperimentLease], caplog: pytest.LogCaptureFixture
) -> None:
    """A driver on another machine (sharing the storage) whose process cannot be seen
    from here: its lease holds until it expires, then it is taken."""
    (tmp_path / "exp").mkdir()
    elsewhere = replace(this_process("gone"), host="node-7", boot_id="another-boot")
    now = time.time()
    live = LeaseRecord(elsewhere, now - 60, now - 5, 30.0)
    (tmp_path / "exp" / LEASE_KEY).write_bytes(live.to_json())
    with pytest.raises(ExperimentLocked) as caught:
        await take(tmp_path, leases)
    assert "host 'node-7'" in str(caught.value) and "in 25 s" in str(caught.value)
    (tmp_path / "exp" / LEASE_KEY).write_bytes(replace(live, renewed_at=now - 31).to_json())
    with caplog.at_level(logging.WARNING, logger="orchestrator.api.lease"):
        mine = await take(tmp_path, leases)
    assert stored(tmp_path).holder == mine.holder
    assert "took over the lease of pid" in caplog.text and "expired 1 s ago" in caplog.text


async def test_a_lease_of_a_dead_process_here_is_taken_at_once(
    tmp_path: Path, leases: list[ExperimentLease]
) -> None:
    gone = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    dead = replace(this_process("crashed"), pid=int(gone.stdout), started="1")
    (tmp_path / "exp").mkdir()
    now = time.time()
    (tmp_path / "exp" / LEASE_KEY).write_bytes(LeaseRecord(dead, now, now, 30.0).to_json())
    mine = await take(tmp_path, leases)  # renewed just now, but its driver is gone
    assert stored(tmp_path).holder == mine.holder


async def test_an_unreadable_lease_is_replaced(
    tmp_path: Path, leases: list[ExperimentLease]
) -> None:
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / LEASE_KEY).write_bytes(b"{half a rec")
    mine = await take(tmp_path, leases)
    assert stored(tmp_path).holder == mine.holder


async def test_a_refused_resume_creates_nothing(tmp_path: Path) -> None:
    from orchestrator.errors import ExperimentNotFound

    with pytest.raises(ExperimentNotFound):
        await acquire_lease(Orchestrator(storage=tmp_path, name="exp", resume=True)._exp)
    assert list(tmp_path.iterdir()) == []
    lease = await acquire_lease(Orchestrator(storage=tmp_path, name="exp")._exp)
    assert (tmp_path / "exp" / LEASE_KEY).exists()
    await lease.release()  # nothing else was written: the directory it made goes too
    assert list(tmp_path.iterdir()) == []


def test_the_ttl_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator import ConfigError
    from orchestrator.api.lease import lease_ttl

    monkeypatch.setenv(TTL_ENV, "soon")
    with pytest.raises(ConfigError, match=TTL_ENV):
        lease_ttl()
    monkeypatch.setenv(TTL_ENV, "3.5")
    assert lease_ttl() == 3.5
    assert json.loads(record().to_json())["ttl"] == 30.0


def an_experiment(storage: Path) -> Path:
    """A journaled experiment's files, enough for ``overwrite`` and ``resume`` to see."""
    exp = storage / "exp"
    (exp / "t" / "checkpoint_000002").mkdir(parents=True)
    (exp / JOURNAL_KEY).write_text(json.dumps({"format": 2, "name": "exp", "trials": []}))
    (exp / "t" / "checkpoint_000002" / "state").write_bytes(b"state")
    return exp


async def test_overwrite_is_refused_while_another_driver_holds_the_experiment(
    tmp_path: Path, leases: list[ExperimentLease]
) -> None:
    exp = an_experiment(tmp_path)
    await take(tmp_path, leases, resume=True)
    before = snapshot(exp)
    with pytest.raises(ExperimentLocked, match=f"pid {os.getpid()} on host"):
        async with Orchestrator(storage=tmp_path, name="exp", overwrite=True):
            pytest.fail("entered an experiment another driver holds")
    assert snapshot(exp) == before  # nothing deleted


async def test_the_command_line_is_refused_before_it_starts_ray(
    tmp_path: Path,
    leases: list[ExperimentLease],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import ray

    from orchestrator.cli import main
    from orchestrator.cli.main import EXIT_FAILED

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Ray was started for a refused command")

    monkeypatch.setattr(ray, "init", refuse)
    an_experiment(tmp_path)
    await take(tmp_path, leases, resume=True)
    argv = ["resume", "--storage", str(tmp_path), "--name", "exp"]
    assert await asyncio.to_thread(main, argv) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "trialflow resume: error: experiment 'exp'" in err
    assert f"pid {os.getpid()}" in err and "--take-over" in err


def test_take_over_on_the_command_line() -> None:
    from orchestrator.cli.args import orchestrator_options
    from orchestrator.cli.main import build_parser

    for command in (["resume", "--name", "x"], ["run", "m:T", "--stop", "a=1"]):
        args = build_parser().parse_args([*command, "--take-over"])
        assert orchestrator_options(args)["take_over"] is True
        args = build_parser().parse_args(command)
        assert orchestrator_options(args)["take_over"] is False


def test_no_trial_may_take_the_leases_name(tmp_path: Path) -> None:
    from orchestrator import ConfigError
    from tests.support.trainables import Counter

    orch = Orchestrator(storage=tmp_path, name="exp")
    with pytest.raises(ConfigError, match=LEASE_KEY):
        orch.add_trial(Counter, trial_id=LEASE_KEY)


@pytest.mark.parametrize("text", ["0.001", "2.9", "0", "-5", "nan"])
async def test_a_ttl_the_renewal_cannot_keep_is_refused_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """A ttl of 1 ms was accepted: the driver fenced itself off at every renewal, logged
    "not renewed" hundreds of times and never ran a trial. Refused now, saying why."""
    import ray

    from orchestrator import ConfigError

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Ray was started with a ttl that was refused")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setenv(TTL_ENV, text)
    with pytest.raises(ConfigError) as caught:
        async with Orchestrator(storage=tmp_path, name="exp"):
            pytest.fail("entered with a ttl below the floor")
    message = str(caught.value)
    assert TTL_ENV in message and f"at least {MIN_TTL_S:g} s" in message
    assert "renewed every ttl/3" in message and "\n" not in message
    assert caught.value.__cause__ is None
    assert list(tmp_path.iterdir()) == []  # nothing created: not even the lease
