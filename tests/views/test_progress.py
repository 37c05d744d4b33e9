"""ProgressReporter: O(1) hooks, the line and the table, both display modes."""

from __future__ import annotations

import asyncio
import io
import logging
import re
import time
import tracemalloc
from dataclasses import dataclass, field
from typing import Any

import pytest
from rich.console import Console

from orchestrator.errors import ConfigError
from orchestrator.views.progress import ProgressReporter

from ..support.observe import OwnTasks


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeTrial:
    id: str
    state: str = "RUNNING"
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FakeCheckpoint:
    iteration: int


def quiet_console() -> Console:
    return Console(file=io.StringIO(), force_terminal=False, width=200)


_OWN = OwnTasks("progress:draw")


@pytest.fixture(autouse=True)
async def others_draws() -> None:
    _OWN.reset()


def draw_tasks() -> list[asyncio.Task[Any]]:
    """The draw tasks this test started that are still running."""
    return _OWN.running()


async def test_10000_results_cost_the_hooks_no_drawing_each() -> None:
    reporter = ProgressReporter("loss", "min", console=quiet_console(), live=False)
    trials = [FakeTrial(f"trial_{i:05d}") for i in range(100)]
    results = [
        (t, {"loss": 1.0 / i, "training_iteration": i}) for i in range(1, 101) for t in trials
    ]
    start = time.thread_time()  # this thread's CPU: what other processes run costs it nothing
    for trial, result in results:
        await reporter.on_trial_result(trial, result)
    elapsed = time.thread_time() - start
    # Quiet, about 20 ms; generous for a loaded CI machine: a redraw per call would take
    # seconds.
    assert elapsed < 0.5, f"10,000 on_trial_result calls took {elapsed * 1e3:.1f} ms"
    assert "10,000 results" in reporter.render_line()
    await reporter.aclose()


async def test_the_line_counts_states_results_best_failures_and_restores() -> None:
    clock = Clock()
    reporter = ProgressReporter("loss", "min", console=quiet_console(), live=False, clock=clock)
    states = ["RUNNING"] * 4 + ["TERMINATED"] * 2 + ["PAUSED", "ERROR"]
    trials = [FakeTrial(f"trial_{i:05d}", s) for i, s in enumerate(states)]
    for trial in trials:
        await reporter.on_trial_start(trial)
    clock.now += 12.3
    for n in range(1234):
        trial = trials[n % 8]
        loss = 0.123 if trial.id == "trial_00003" else 0.5 + n / 1000
        await reporter.on_trial_result(trial, {"loss": loss, "training_iteration": n // 8 + 1})
    await reporter.on_trial_error(trials[7], RuntimeError("boom"))
    await reporter.on_trial_error(trials[7], RuntimeError("boom"))
    await reporter.on_trial_restore(trials[7], FakeCheckpoint(3))

    assert reporter.render_line(final=True) == (
        "[  12.3s] 8 trials: 4 RUNNING, 2 TERMINATED, 1 PAUSED, 1 ERROR | 1,234 results "
        "(100/s) | best loss=0.123 (trial_00003) | 2 failures, 1 restored"
    )
    await reporter.aclose()


async def test_best_follows_the_latest_value_and_the_mode() -> None:
    low = ProgressReporter("acc", "min", console=quiet_console(), live=False)
    high = ProgressReporter("eval/acc", console=quiet_console(), live=False)  # mode: max
    a, b = FakeTrial("a"), FakeTrial("b")
    for reporter, key in ((low, "acc"), (high, "eval/acc")):
        for trial, values in ((a, [0.9, 0.2]), (b, [0.5, 0.6])):
            for i, v in enumerate(values, 1):
                result = {"eval": {"acc": v}} if "/" in key else {"acc": v}
                await reporter.on_trial_result(trial, {**result, "training_iteration": i})
    assert "best acc=0.2 (a)" in low.render_line()
    assert "best eval/acc=0.6 (b)" in high.render_line()  # a's 0.9 is no longer its value
    await low.aclose()
    await high.aclose()


async def test_the_table_shows_at_most_max_rows_with_the_best_first_and_bold() -> None:
    reporter = ProgressReporter("loss", "min", console=quiet_console(), live=False, max_rows=5)
    trials = [FakeTrial(f"t{i:02d}", "TERMINATED" if i < 20 else "RUNNING") for i in range(25)]
    for i, trial in enumerate(trials):
        await reporter.on_trial_result(trial, {"loss": 10.0 - i / 10, "training_iteration": 7})
    await reporter.on_trial_result(trials[3], {"loss": 0.01, "training_iteration": 8})

    table = reporter.render_table()
    assert [c.header for c in table.columns] == ["trial", "state", "iter", "loss", "failures"]
    ids = list(table.columns[0].cells)
    assert ids == ["t03", "t20", "t21", "t22", "t23"]  # best, then running ones
    assert table.rows[0].style == "bold green" and table.rows[1].style is None
    assert list(table.columns[3].cells)[0] == "0.01"
    assert "25 trials: 5 RUNNING, 20 TERMINATED" in str(table.title)
    assert "20 more trials not shown" in str(table.caption)
    await reporter.aclose()


async def test_off_a_terminal_it_prints_lines_and_a_final_summary() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=300)
    reporter = ProgressReporter("loss", "min", console=console, line_interval=0.05)
    assert reporter.live is False
    trial = FakeTrial("t1")
    await reporter.on_trial_result(trial, {"loss": 0.5, "training_iteration": 1})
    for _ in range(100):
        await asyncio.sleep(0.02)
        if out.getvalue().count("\n") >= 2:
            break
    trial.state = "TERMINATED"
    await reporter.on_experiment_end([trial])
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3
    pattern = (
        r"\[ *\d+\.\ds\] 1 trial: 1 (RUNNING|TERMINATED) "
        r"\| 1 result \(\d+/s\) \| best loss=0.5 \(t1\)"
    )
    assert all(re.fullmatch(pattern, line) for line in lines), lines
    assert "TERMINATED" in lines[-1]
    assert draw_tasks() == []


async def test_in_a_terminal_it_draws_a_live_table_and_stops_it() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    reporter = ProgressReporter("loss", "min", console=console, interval=0.02)
    assert reporter.live is True
    await reporter.on_trial_result(
        FakeTrial("trial_00042"), {"loss": 0.25, "training_iteration": 3}
    )
    for _ in range(100):
        await asyncio.sleep(0.02)
        if "trial_00042" in out.getvalue():
            break
    assert "trial_00042" in out.getvalue()
    await reporter.aclose()
    assert draw_tasks() == []
    assert out.getvalue().rstrip().splitlines()[-1].endswith("best loss=0.25 (trial_00042)")


async def test_hooks_never_raise(caplog: pytest.LogCaptureFixture) -> None:
    reporter = ProgressReporter("loss", console=quiet_console(), live=False)
    with caplog.at_level(logging.ERROR, logger="orchestrator.views.progress"):
        await reporter.on_trial_result(FakeTrial("t1"), None)  # type: ignore[arg-type]
        await reporter.on_trial_restore(FakeTrial("t1"), object())
        await reporter.on_trial_result(FakeTrial("t1"), {"loss": "n/a", "training_iteration": 1})
    assert len(caplog.records) == 1
    assert "1 result" in reporter.render_line() and "best" not in reporter.render_line()
    await reporter.aclose()


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="mode"):
        ProgressReporter("loss", "lowest")
    with pytest.raises(ConfigError, match="needs a metric"):
        ProgressReporter(None, "min")
    with pytest.raises(ConfigError, match="interval"):
        ProgressReporter("loss", interval=0)


async def test_a_cancelled_aclose_still_stops_the_display() -> None:
    out = io.StringIO()
    reporter = ProgressReporter(
        "loss", console=Console(file=out, force_terminal=True, width=120), interval=0.02
    )
    await reporter.on_trial_result(FakeTrial("t1"), {"loss": 1.0, "training_iteration": 1})
    closing = asyncio.ensure_future(reporter.aclose())
    await asyncio.sleep(0)  # aclose runs up to its wait for the drawing task
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    for _ in range(100):
        if not draw_tasks():
            break
        await asyncio.sleep(0.01)
    assert draw_tasks() == []
    # The reporter is usable again, and the next aclose prints the summary.
    await reporter.on_trial_result(FakeTrial("t1"), {"loss": 0.5, "training_iteration": 2})
    assert len(draw_tasks()) == 1
    await reporter.aclose()
    assert out.getvalue().rstrip().endswith("best loss=0.5 (t1)")


async def test_a_running_trial_silent_much_longer_than_its_steps_is_shown() -> None:
    """Silent: RUNNING, and nothing reported for over 10x its median step time (at least
    10 s). The clock is injected, so nothing here waits."""
    clock = Clock()
    reporter = ProgressReporter(console=quiet_console(), live=False, clock=clock)
    fast, slow, done, fresh = (FakeTrial(n) for n in ("fast", "slow", "done", "fresh"))
    for i in range(1, 6):
        await reporter.on_trial_result(fast, {"training_iteration": i, "time_this_iter_s": 0.5})
        await reporter.on_trial_result(slow, {"training_iteration": i, "time_this_iter_s": 3.0})
        await reporter.on_trial_result(done, {"training_iteration": i, "time_this_iter_s": 0.1})
    await reporter.on_trial_start(fresh)  # no step yet: nothing is usual for it
    done.state = "TERMINATED"
    clock.now += 9.0
    assert reporter.silent() == {}  # 9 s is within the 10 s floor
    clock.now += 2.0
    assert reporter.silent() == {"fast": 11.0}  # slow's steps take 3 s: 30 s is usual
    assert "no result for: fast 11s" in reporter.render_line()
    states = dict(
        zip(
            reporter.render_table().columns[0].cells,
            reporter.render_table().columns[1].cells,
            strict=True,
        )
    )
    assert states["fast"] == "RUNNING, no result for 11s"
    assert states["slow"] == "RUNNING" and states["done"] == "TERMINATED"
    clock.now += 120.0
    assert reporter.silent() == {"fast": 131.0, "slow": 131.0}
    assert "no result for: fast 2m11s, slow 2m11s" in reporter.render_line()
    await reporter.on_trial_result(fast, {"training_iteration": 6, "time_this_iter_s": 0.5})
    await reporter.on_trial_restore(slow, FakeCheckpoint(3))  # its silence starts again
    assert reporter.silent() == {}
    await reporter.aclose()


async def test_the_usual_step_is_of_the_last_15_and_a_finished_trial_keeps_little() -> None:
    """Silence is judged on the median of a trial's last 15 steps; what the reporter
    keeps per trial stays small (issue 36: a ``deque(maxlen=15)`` per trial was some 600
    bytes of every finished trial's, at ten thousand trials)."""
    clock = Clock()
    reporter = ProgressReporter(console=quiet_console(), live=False, clock=clock)
    trial = FakeTrial("t")
    for i in range(1, 36):  # 20 slow steps, then 15 fast ones
        took = 10.0 if i <= 20 else 0.1
        await reporter.on_trial_result(trial, {"training_iteration": i, "time_this_iter_s": took})
    clock.now += 11.0
    assert reporter.silent() == {"t": 11.0}  # the slow steps are forgotten

    trials = [FakeTrial(f"trial_{i:05d}", state="TERMINATED") for i in range(300)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for t in trials:
            for i in (1, 2):
                step = {"training_iteration": i, "time_this_iter_s": 0.1}
                await reporter.on_trial_result(t, step)
            await reporter.on_trial_complete(t)
        per_trial = (tracemalloc.get_traced_memory()[0] - before) / len(trials)
    finally:
        tracemalloc.stop()
    assert per_trial < 300, f"{per_trial:.0f} bytes kept per finished trial"
    await reporter.aclose()
