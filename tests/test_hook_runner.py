"""The hook runner on its own (no Ray): per-trial order, the slow-hook watchdog, and
the count of results its queued hooks have processed."""

from __future__ import annotations

import asyncio
import logging
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
