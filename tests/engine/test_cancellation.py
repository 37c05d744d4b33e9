"""A cancelled task of ours stops, whatever it was waiting for.

Before Python 3.12, ``asyncio.wait_for`` returns normally when its task is cancelled in
the same loop step as the awaited thing completes: the cancellation is lost. A sweep
waiting for its next change went on to run all its trials after ``Orchestrator.sweep``
was cancelled (its change event is set as a result arrives: exactly when a caller
watching the trials decides to cancel). Our code waits with a deadline through
``orchestrator.timeouts.within``, which keeps the cancellation (``asyncio.timeout``
would too, but Python 3.10, which we support, has none)."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from orchestrator.sweeps.driver import Sweep
from orchestrator.timeouts import within

from ..support import REPO_ROOT


async def test_a_sweep_cancelled_as_a_change_wakes_it_stops() -> None:
    sweep = Sweep.__new__(Sweep)  # only what _wait_for_change reads
    sweep._changed = asyncio.Event()
    sweep._scheduler = object()  # type: ignore[assignment]  # a scheduler: the timed wait
    waiting = asyncio.create_task(sweep._wait_for_change())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not waiting.done()
    sweep._changed.set()
    waiting.cancel()  # the same step: nothing ran in between
    with pytest.raises(asyncio.CancelledError):
        await waiting


def _calls_wait_for(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(), str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in ("wait_for", "timeout")
        and isinstance(node.value, ast.Name)
        and node.value.id == "asyncio"
    ]


def test_no_code_of_ours_waits_with_asyncio_wait_for_or_timeout() -> None:
    found = [
        f"{path.relative_to(REPO_ROOT)}:{line}"
        for top in ("orchestrator", "storage", "transfer")
        for path in sorted((REPO_ROOT / top).rglob("*.py"))
        for line in _calls_wait_for(path)
    ]
    assert not found, f"use orchestrator.timeouts.within instead (see above): {found}"


async def test_within_returns_times_out_and_passes_a_cancellation_on() -> None:
    assert await within(5.0, asyncio.sleep(0, "done")) == "done"
    slow = asyncio.ensure_future(asyncio.sleep(30))
    with pytest.raises(TimeoutError):
        await within(0.01, slow)
    assert slow.cancelled()
    event = asyncio.Event()
    waiting = asyncio.create_task(within(5.0, event.wait()))
    for _ in range(3):
        await asyncio.sleep(0)
    event.set()
    waiting.cancel()  # the same step as the event: still a cancellation
    with pytest.raises(asyncio.CancelledError):
        await waiting
