"""The hook runner on its own (no Ray): per-trial order, the slow-hook watchdog, and
the count of results its queued hooks have processed."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

import pytest

from orchestrator.engine.hooks import HookRunner


async def test_only_the_call_that_runs_past_slow_after_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One timer watches a whole queue: many quick calls are never reported, the one
    slow call among them is, once, with its trial."""
    runner: HookRunner | None = None
    seen: list[int] = []

    class Hook:
        async def on_trial_result(self, trial: Any, result: dict[str, Any]) -> None:
            seen.append(result["i"])
            if result["i"] == 500:  # slow: until the watchdog has reported it
                assert runner is not None
                while runner.statistics().slow_calls == 0:
                    await asyncio.sleep(0.01)

    caplog.set_level(logging.WARNING, logger="orchestrator.engine.hooks")
    runner = HookRunner([Hook()], slow_after=0.1)
    counted: list[tuple[str, int]] = []
    runner.watch_results(lambda key, n: counted.append((key, n)))
    for i in range(1000):
        runner.emit("trial_a", "on_trial_result", None, {"i": i})
    await asyncio.wait_for(runner.wait_idle(), 30)
    stats = runner.statistics()
    assert seen == list(range(1000)) and stats.calls == 1000
    assert stats.slow_calls == 1 and stats.backlog == 0
    assert caplog.text.count("has run for more than 0.1 s") == 1
    assert "Hook.on_trial_result for trial_a" in caplog.text
    assert counted == [("trial_a", n) for n in range(1, 1001)]
    assert runner.results_seen("trial_a") == 1000
    await runner.aclose()


async def test_counting_starts_where_a_trial_left_off() -> None:
    class Hook:
        def on_trial_result(self, trial: Any, result: dict[str, Any]) -> None:
            pass

    runner = HookRunner([Hook()])
    assert runner.queues("on_trial_result") and not runner.queues("on_checkpoint")
    runner.count_results_from("t", 40)
    runner.emit("t", "on_trial_result", None, {})
    await asyncio.wait_for(runner.wait_idle(), 30)
    assert runner.results_seen("t") == 41
    await runner.aclose()


async def test_plain_hooks_run_in_batches_in_order_with_failures_and_slow_calls(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Consecutive events whose hooks are all plain methods share a trip to a worker
    thread; order, failure isolation and the watchdog hold within a batch, and an
    ``async def`` hook between them keeps its place."""
    calls: list[str] = []
    runner: HookRunner | None = None

    class Plain:
        def on_trial_result(self, trial: Any, result: dict[str, Any]) -> None:
            calls.append(f"r{result['i']}")
            if result["i"] == 3:
                raise KeyError("hook bug")
            if result["i"] in (200, 400):  # two slow calls in one batch: both reported
                assert runner is not None
                want = 1 if result["i"] == 200 else 2
                while runner.statistics().slow_calls < want:
                    time.sleep(0.01)

    class Async:
        async def on_checkpoint(self, trial: Any, checkpoint: int) -> None:
            calls.append(f"c{checkpoint}")

    caplog.set_level(logging.WARNING, logger="orchestrator.engine.hooks")
    runner = HookRunner([Plain(), Async()], slow_after=0.1)
    expected = []
    for i in range(600):
        runner.emit("t", "on_trial_result", None, {"i": i})
        expected.append(f"r{i}")
        if i % 100 == 50:
            runner.emit("t", "on_checkpoint", None, i)
            expected.append(f"c{i}")
    await asyncio.wait_for(runner.wait_idle(), 60)
    stats = runner.statistics()
    assert calls == expected
    assert stats.calls == len(expected) and stats.failures == 1 and stats.slow_calls == 2
    assert "hook Plain.on_trial_result failed for t" in caplog.text and "KeyError" in caplog.text
    assert caplog.text.count("hook Plain.on_trial_result for t has run for more than") == 2
    assert runner.results_seen("t") == 600
    await runner.aclose()


@pytest.mark.parametrize("kind", ["plain", "async"])
async def test_a_hook_failing_every_time_shows_one_traceback_then_a_line_each(
    caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    """The rule: the first failure of one hook with one exception type in full, each
    repeat one line with the count so far (across trials); another type is news."""

    class Plain:
        def on_trial_result(self, trial: Any, result: dict[str, Any]) -> None:
            if result["i"] == 30:
                raise KeyError("another bug")
            raise ValueError(f"bad value {result['i']}\nsecond line")

    class Async:
        async def on_trial_result(self, trial: Any, result: dict[str, Any]) -> None:
            Plain.on_trial_result(self, trial, result)  # type: ignore[arg-type]

    caplog.set_level(logging.ERROR, logger="orchestrator.engine.hooks")
    runner = HookRunner([Plain() if kind == "plain" else Async()])
    for i in range(60):
        runner.emit(f"t{i % 2}", "on_trial_result", None, {"i": i})
    await asyncio.wait_for(runner.wait_idle(), 60)
    await runner.aclose()
    label = f"{'Plain' if kind == 'plain' else 'Async'}.on_trial_result"
    records = [r for r in caplog.records if r.name == "orchestrator.engine.hooks"]
    assert runner.statistics().failures == 60 and len(records) == 60
    full = [r for r in records if r.exc_info]
    assert [r.exc_info[0] for r in full if r.exc_info] == [ValueError, KeyError]
    assert caplog.text.count("Traceback") == 2
    again = [r.getMessage() for r in records if not r.exc_info]
    assert len(again) == 58
    line = (
        rf"hook {label} failed again for (t[01]) \((\d+) times so far\): ValueError: bad value \d+"
    )
    matched = [re.fullmatch(line, m) for m in again]  # one line: the message's first
    assert all(matched), again
    counts = sorted(int(m.group(2)) for m in matched if m)
    assert counts == list(range(2, 60))  # ValueError's repeats, counted across trials
    assert {m.group(1) for m in matched if m} == {"t0", "t1"}


async def test_closing_abandons_a_blocked_plain_hook_after_its_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A plain hook that blocks is given the grace, then named and abandoned: close
    returns, the rest of its batch never runs, and its thread does not hold the
    process at exit (a daemon)."""
    import threading

    entered, release = threading.Event(), threading.Event()
    calls: list[int] = []
    threads: list[threading.Thread] = []

    class Blocks:
        def on_trial_result(self, trial: Any, result: dict[str, Any]) -> None:
            calls.append(result["i"])
            if result["i"] == 1:
                threads.append(threading.current_thread())
                entered.set()
                release.wait(120)

    caplog.set_level(logging.WARNING, logger="orchestrator.engine.hooks")
    runner = HookRunner([Blocks()])
    for i in range(5):
        runner.emit("t", "on_trial_result", None, {"i": i})
    try:
        assert await asyncio.to_thread(entered.wait, 60)
        started = time.monotonic()
        abandoned = await asyncio.wait_for(runner.aclose(grace=0.5), 60)
        took = time.monotonic() - started
        assert abandoned == ["hook Blocks.on_trial_result for t"]
        assert took < 30  # the grace, not the hook
        assert "hook Blocks.on_trial_result for t is still running; abandoned" in caplog.text
        assert threads[0].daemon
    finally:
        release.set()
    await asyncio.to_thread(threads[0].join, 60)
    assert calls == [0, 1]  # closed: the batch stopped after the abandoned call


async def test_a_plain_hook_that_ends_within_the_grace_is_not_abandoned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import threading

    entered, release = threading.Event(), threading.Event()

    class Slow:
        def on_trial_result(self, trial: Any, result: dict[str, Any]) -> None:
            entered.set()
            release.wait(120)

    caplog.set_level(logging.WARNING, logger="orchestrator.engine.hooks")
    runner = HookRunner([Slow()])
    runner.emit("t", "on_trial_result", None, {})
    assert await asyncio.to_thread(entered.wait, 60)
    closing = asyncio.ensure_future(runner.aclose(grace=120))
    await asyncio.sleep(0.2)
    release.set()
    assert await asyncio.wait_for(closing, 60) == []
    assert "abandoned" not in caplog.text
