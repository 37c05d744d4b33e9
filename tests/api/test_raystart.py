"""Ray starts off the loop (issue 31): ``ray.init`` blocks for seconds, and the loop must
keep renewing the experiment's lease meanwhile. ``ray.init`` is a recorded stand-in
here (as in ``test_cli.py``); the lease renewed during a real session's start is
checked in ``tests/storage/test_lease_truth.py``."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from orchestrator.engine.raystart import start_ray

WAIT_S = 60.0


class SlowRay:
    """``ray.init`` blocks until :attr:`gate` is set, noting its thread and logging
    what Ray logs when it starts off the main thread; ``shutdown`` is recorded."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import ray

        self.calls: list[Any] = []
        self.threads: list[threading.Thread] = []
        self.up = False
        self.entered = threading.Event()
        self.gate = threading.Event()
        monkeypatch.setattr(ray, "is_initialized", lambda: self.up)
        monkeypatch.setattr(ray, "init", self.init)
        monkeypatch.setattr(ray, "shutdown", lambda: self.calls.append("shutdown"))
        monkeypatch.delenv("RAY_ADDRESS", raising=False)

    def init(self, **options: Any) -> None:
        self.threads.append(threading.current_thread())
        logging.getLogger("ray._private.worker").warning(
            "SIGTERM handler is not set because current thread is not the main thread."
        )
        self.entered.set()
        self.gate.wait(WAIT_S)
        self.calls.append(options)
        self.up = True


async def test_ray_starts_in_a_thread_while_the_loop_runs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ray = SlowRay(monkeypatch)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    try:
        starting = asyncio.create_task(start_ray(None, num_cpus=2))
        await asyncio.to_thread(ray.entered.wait, WAIT_S)
        before = ticks
        for _ in range(10):
            await asyncio.sleep(0)
        assert ticks > before and not starting.done()  # the loop runs while Ray starts
        ray.gate.set()
        with caplog.at_level(logging.WARNING):
            assert await asyncio.wait_for(starting, WAIT_S) is True
    finally:
        ticker.cancel()
    assert ray.threads[0] is not threading.main_thread()
    assert ray.calls[0]["address"] == "local" and ray.calls[0]["num_cpus"] == 2
    assert "SIGTERM handler" not in caplog.text  # ours is taken once Ray is up


async def test_a_cancelled_start_waits_for_ray_and_shuts_it_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A start cannot be stopped midway: a cancel (Ctrl-C while Ray starts) waits for
    it, then shuts the Ray it started down rather than leave it to the process's exit."""
    ray = SlowRay(monkeypatch)
    starting = asyncio.create_task(start_ray(None))
    await asyncio.to_thread(ray.entered.wait, WAIT_S)
    starting.cancel()
    for _ in range(10):
        await asyncio.sleep(0)
    assert not starting.done() and ray.calls == []
    ray.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(starting, WAIT_S)
    assert ray.calls[-1] == "shutdown" and len(ray.calls) == 2


@pytest.mark.parametrize("given", [("local", None), (None, "local")])
async def test_local_from_the_environment_starts_the_same_private_ray(
    monkeypatch: pytest.MonkeyPatch, given: tuple[str | None, str | None]
) -> None:
    """``RAY_ADDRESS=local`` (how Ray's docs and our benchmarks ask for a private Ray) is
    the same start as ``address="local"``: no dashboard, whose ten processes would take
    the CPUs from Ray's start and the trials. It was joined as an address, dashboard
    and all."""
    ray = SlowRay(monkeypatch)
    ray.gate.set()
    address, env = given
    if env is not None:
        monkeypatch.setenv("RAY_ADDRESS", env)
    assert await asyncio.wait_for(start_ray(address, num_cpus=2), WAIT_S) is True
    options = ray.calls[0]
    assert options["address"] == "local" and options["include_dashboard"] is False
    assert options["num_cpus"] == 2
