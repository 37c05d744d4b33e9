"""A live view of an experiment: :class:`ProgressReporter`, a hook object.

The hook methods only record (a few attribute writes per call, no I/O); a drawing task
started by the first hook call turns a snapshot of that record into a rich table (in a
terminal) or a one-line summary (in a log file or CI output). In a terminal the table
is rendered and written by rich's own refresh thread, so the event loop only builds a
~20-row table once per ``interval``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from orchestrator.core.best import lookup, pick_best
from orchestrator.errors import ConfigError
from orchestrator.timeouts import within

__all__ = ["ProgressReporter"]

log = logging.getLogger("orchestrator.views.progress")

#: The order states are listed in; any other state comes after these, by name.
STATE_ORDER = ("RUNNING", "STARTING", "RESTORING", "PENDING", "TERMINATED", "PAUSED", "ERROR")
_ROW_PRIORITY = {"RUNNING": 0, "STARTING": 0, "RESTORING": 0, "ERROR": 1, "PAUSED": 2}
_RATE_WINDOW_S = 10.0
#: A RUNNING trial is shown as *silent* once it has reported nothing for this many times
#: its usual step time (the median of its recent ``time_this_iter_s``)...
SILENT_AFTER_STEPS = 10
#: ...and for at least this many seconds (results come in batches, and a save or a
#: scheduler holding the trial may delay them a little).
SILENT_AFTER_S = 10.0
_STEP_SAMPLES = 15


class _Row:
    __slots__ = (
        "trial",
        "trial_id",
        "iteration",
        "value",
        "failures",
        "restores",
        "seen_at",
        "step_times",
    )

    def __init__(self, trial: Any) -> None:
        self.trial = trial
        self.trial_id = str(trial.id)
        self.iteration = 0
        self.value: Any = None
        self.failures = 0
        self.restores = 0
        self.seen_at: float | None = None  # the clock at its last result (or restore)
        # Its last ``_STEP_SAMPLES`` step times: a tuple, not a ``deque(maxlen=...)``,
        # whose first block is some 600 bytes, kept for every trial of the experiment
        # (issue 36: it was a fifth of what a finished trial left in the driver).
        self.step_times: tuple[float, ...] = ()


class ProgressReporter:
    """Shows trials by state, each trial's iteration, ``metric`` and failures, the best
    trial (by its latest ``metric`` value, the rule of :mod:`orchestrator.core.best`: NaN and
    infinities never count; ``mode`` "max" or "min", None meaning "max"), and results
    per second.

    ``live=None`` draws a live table when ``console`` (default: stdout) is a terminal,
    else prints one line every ``line_interval`` seconds. ``on_experiment_end`` (or
    :meth:`aclose`) stops the display and prints a final summary line; the reporter
    may be used again afterwards. ``clock`` (seconds, monotonic) is for tests.

    A RUNNING trial that has reported nothing for much longer than its usual step time
    (:data:`SILENT_AFTER_STEPS` x the median of its recent steps, at least
    :data:`SILENT_AFTER_S`) is shown as silent, with for how long (:meth:`silent`): a
    step that hangs is seen without waiting for the whole experiment.

    Hook calls cost O(1) and never raise; the drawing task logs its own failures
    (``orchestrator.views.progress``) and goes on.
    """

    def __init__(
        self,
        metric: str | None = None,
        mode: str | None = None,
        *,
        console: Console | None = None,
        live: bool | None = None,
        interval: float = 1.0,
        line_interval: float = 5.0,
        max_rows: int = 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if mode not in (None, "max", "min"):
            raise ConfigError(f"mode must be 'max', 'min' or None, got {mode!r}")
        if mode is not None and metric is None:
            raise ConfigError(f"mode={mode!r} needs a metric to rank trials by")
        if not interval > 0 or not line_interval > 0 or max_rows < 1:
            raise ConfigError(
                "ProgressReporter needs interval > 0, line_interval > 0 and max_rows >= 1; "
                f"got {interval!r}, {line_interval!r}, {max_rows!r}"
            )
        self.metric = metric
        self.mode = mode or "max"
        self.console = console if console is not None else Console()
        self.live = self.console.is_terminal if live is None else bool(live)
        self._interval = float(interval)
        self._line_interval = float(line_interval)
        self._max_rows = max_rows
        self._clock = clock
        self._rows: dict[str, _Row] = {}
        self._results = self._failures = self._restores = 0
        self._started: float | None = None
        self._samples: collections.deque[tuple[float, int]] = collections.deque()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._stop = asyncio.Event()
        self._display: Live | None = None

    #: Every hook here only records (O(1), no I/O): called inline by the hook runner.
    inline_hooks = frozenset(
        {
            "on_trial_start",
            "on_trial_result",
            "on_trial_restore",
            "on_trial_error",
            "on_trial_complete",
        }
    )

    def set_objective(self, metric: str | None, mode: str | None) -> None:
        """Rank trials by ``metric`` from now on (a sweep sets its own)."""
        self.metric = metric
        self.mode = mode or "max"

    # -- hooks: O(1) bookkeeping ------------------------------------------------------

    async def on_trial_start(self, trial: Any) -> None:
        self._see(trial)

    async def on_trial_result(self, trial: Any, result: Mapping[str, Any]) -> None:
        try:
            row = self._rows.get(trial.id) or self._row(trial)
            row.iteration = result.get("training_iteration", row.iteration + 1)
            row.seen_at = self._clock()
            took = result.get("time_this_iter_s")
            if type(took) is float:
                row.step_times = (*row.step_times[1 - _STEP_SAMPLES :], took)
            if self.metric is not None:
                value = lookup(result, self.metric)
                if value is not None:
                    row.value = value  # the trial's value: best.value_of, kept as it goes
            self._results += 1
            if self._task is None:
                self._start()
        except Exception:
            log.exception("the progress reporter could not record a result of %r", trial)

    async def on_trial_restore(self, trial: Any, checkpoint: Any) -> None:
        try:
            row = self._row(trial)
            row.restores += 1
            row.seen_at = self._clock()  # its first step after a load may be slow: from now
            row.iteration = int(getattr(checkpoint, "iteration", row.iteration))
            self._restores += 1
        except Exception:
            log.exception("the progress reporter could not record a restore of %r", trial)

    async def on_trial_error(self, trial: Any, error: BaseException) -> None:
        try:
            self._row(trial).failures += 1
            self._failures += 1
        except Exception:
            log.exception("the progress reporter could not record a failure of %r", trial)

    async def on_trial_complete(self, trial: Any) -> None:
        self._see(trial)

    async def on_experiment_end(self, trials: Sequence[Any]) -> None:
        for trial in trials:
            self._see(trial)
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the display and print the final summary line (once per run). If this
        is cancelled, the display still stops, without the summary."""
        task = self._task
        if task is None or self._closing:
            return
        self._closing = True
        self._stop.set()
        try:
            await asyncio.wait({task})  # a cancelled aclose leaves the task to finish
        finally:
            self._closing = False
        if self._task is task:
            self._task = None
        try:
            self._print(self.render_line(final=True))
        except Exception:
            log.exception("the progress reporter could not print its summary")

    # -- rendering (from a snapshot, on demand) ---------------------------------------

    def render_line(self, *, final: bool = False) -> str:
        """``[  12.3s] 8 trials: 4 RUNNING, ... | 1,234 results (95/s) | best loss=0.123
        (trial_00003) | 2 failures, 1 restored``; ``final`` uses the overall rate."""
        counts = self._counts()
        states = ", ".join(f"{n} {state}" for state, n in counts.items())
        trials = _plural(len(self._rows), "trial")
        parts = [f"[{self._elapsed():6.1f}s] {trials}: {states or 'none'}"]
        rate = self._overall_rate() if final else self._rate()
        parts.append(f"{_plural(self._results, 'result')} ({rate:,.0f}/s)")
        best = self._best()
        if best is not None:
            parts.append(f"best {self.metric}={_fmt(best.value)} ({best.trial_id})")
        if self._failures or self._restores:
            parts.append(f"{_plural(self._failures, 'failure')}, {self._restores:,} restored")
        silent = self.silent()
        if silent:
            shown = ", ".join(f"{tid} {_duration(s)}" for tid, s in list(silent.items())[:3])
            more = f" and {len(silent) - 3:,} more" if len(silent) > 3 else ""
            parts.append(f"no result for: {shown}{more}")
        return " | ".join(parts)

    def silent(self) -> dict[str, float]:
        """The RUNNING trials that have reported nothing for much longer than their
        usual step time (see the class docstring): seconds since their last result,
        longest first. A trial with no result yet is never in it (nothing is usual)."""
        now = self._clock()
        found: dict[str, float] = {}
        for row in self._rows.values():
            quiet = self._silence(row, now)
            if quiet is not None:
                found[row.trial_id] = quiet
        return dict(sorted(found.items(), key=lambda item: -item[1]))

    def render_table(self) -> Table:
        """The live table: title = trials by state, one row per trial (at most
        ``max_rows``: the best, then running, failed, paused, others), the best row
        in bold green, caption = results/s and failures."""
        counts = self._counts()
        states = ", ".join(f"{n} {s}" for s, n in counts.items())
        title = f"{_plural(len(self._rows), 'trial')}: {states}"
        best = self._best()
        rows = sorted(self._rows.values(), key=lambda r: self._rank(r, best))
        hidden = len(rows) - self._max_rows
        caption = (
            f"[{self._elapsed():.1f}s] {_plural(self._results, 'result')} "
            f"({self._rate():,.0f}/s), "
            f"{_plural(self._failures, 'failure')}, {self._restores:,} restored"
        )
        if hidden > 0:
            caption += f"; {hidden:,} more trials not shown"
        table = Table(title=title, caption=caption, caption_justify="left")
        table.add_column("trial")
        table.add_column("state")
        table.add_column("iter", justify="right")
        if self.metric is not None:
            table.add_column(self.metric, justify="right")
        table.add_column("failures", justify="right")
        now = self._clock()
        for row in rows[: self._max_rows]:
            state = _state(row.trial)
            quiet = self._silence(row, now)
            if quiet is not None:
                state += f", no result for {_duration(quiet)}"
            cells = [row.trial_id, state, str(row.iteration)]
            if self.metric is not None:
                cells.append("" if row.value is None else _fmt(row.value))
            cells.append(str(row.failures))
            table.add_row(*cells, style="bold green" if row is best else None)
        return table

    # -- internals --------------------------------------------------------------------

    def _see(self, trial: Any) -> None:
        try:
            self._row(trial)
        except Exception:
            log.exception("the progress reporter could not record %r", trial)

    def _row(self, trial: Any) -> _Row:
        row = self._rows.get(trial.id)
        if row is None:
            row = self._rows[trial.id] = _Row(trial)
        if self._task is None:
            self._start()
        return row

    def _start(self) -> None:
        if self._closing:
            return  # calls during aclose are recorded; the summary line includes them
        if self._started is None:
            self._started = self._clock()
        self._stop = asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._run(self._stop), name="progress:draw")
        task.add_done_callback(self._finished)
        self._task = task

    def _finished(self, task: asyncio.Task[None]) -> None:
        if self._task is task:
            self._task = None
        if not task.cancelled() and task.exception() is not None:
            log.error("the progress display failed", exc_info=task.exception())

    async def _run(self, stop: asyncio.Event) -> None:
        period = self._interval if self.live else self._line_interval
        try:
            if self.live:
                self._display = Live(
                    self.render_table(),
                    console=self.console,
                    refresh_per_second=1.0 / self._interval,
                )
                self._display.start()
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await within(period, stop.wait())
                self._draw(final=stop.is_set())
        finally:
            if self._display is not None:
                display, self._display = self._display, None
                display.stop()

    def _draw(self, *, final: bool) -> None:
        try:
            now = self._clock()
            self._samples.append((now, self._results))
            while len(self._samples) > 2 and now - self._samples[1][0] >= _RATE_WINDOW_S:
                self._samples.popleft()
            if self._display is not None:
                self._display.update(self.render_table(), refresh=final)
            elif not final:
                self._print(self.render_line())
        except Exception:
            log.exception("the progress reporter could not draw")

    def _print(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def _elapsed(self) -> float:
        return 0.0 if self._started is None else self._clock() - self._started

    def _overall_rate(self) -> float:
        elapsed = self._elapsed()
        return self._results / elapsed if elapsed > 0 else 0.0

    def _rate(self) -> float:
        """Results per second over the last ~10 s of draws (overall before that)."""
        if not self._samples:
            return self._overall_rate()
        then, count = self._samples[0]
        span = self._clock() - then
        return (self._results - count) / span if span > 0 else self._overall_rate()

    def _counts(self) -> dict[str, int]:
        counts = collections.Counter(_state(row.trial) for row in self._rows.values())
        known = [s for s in STATE_ORDER if s in counts]
        return {s: counts[s] for s in known + sorted(set(counts) - set(known))}

    def _best(self) -> _Row | None:
        if self.metric is None:
            return None
        found = pick_best(((row, row.value) for row in self._rows.values()), self.mode)
        return found[0] if found is not None else None

    def _silence(self, row: _Row, now: float) -> float | None:
        if row.seen_at is None or not row.step_times or _state(row.trial) != "RUNNING":
            return None
        quiet = now - row.seen_at
        usual = statistics.median(row.step_times)
        return quiet if quiet > max(SILENT_AFTER_STEPS * usual, SILENT_AFTER_S) else None

    def _rank(self, row: _Row, best: _Row | None) -> tuple[int, str]:
        if row is best:
            return (-1, row.trial_id)
        return (_ROW_PRIORITY.get(_state(row.trial), 3), row.trial_id)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def _state(trial: Any) -> str:
    state = getattr(trial, "state", None)
    return str(getattr(state, "value", state))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(value.item()) if hasattr(value, "item") else None
        except (TypeError, ValueError):
            return None
    if value is None or math.isnan(value):
        return None
    return float(value)


def _fmt(value: Any) -> str:
    number = _number(value)
    return f"{number:.4g}" if number is not None else str(value)
