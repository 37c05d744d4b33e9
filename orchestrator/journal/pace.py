"""When the journal's next write is due.

The pause between writes grows with what a write costs: with the CPU time of building
it (:data:`WRITE_SHARE`), so the journal never takes more than a small share of the
driver's CPU, and with the time storage took to take it (:data:`STORAGE_SHARE`), so a
slow bucket is not kept busy. A checkpoint persisted or a trial that settled hurries
the next write (:meth:`WritePace.soon`, :meth:`WritePace.urgent`), within
:data:`DURABLE_WITHIN_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time

from orchestrator.timeouts import within

__all__ = [
    "DURABLE_WITHIN_S",
    "STORAGE_SHARE",
    "URGENT_CPU_SHARE",
    "URGENT_DELAY",
    "WRITE_SHARE",
    "WritePace",
]

#: The largest share of the driver's CPU the journal may take: after building a document
#: took ``c`` CPU-seconds, the next write waits at least ``c / WRITE_SHARE``.
WRITE_SHARE = 0.05
#: The largest share of wall time storage may spend taking journal writes: after one
#: took ``t`` seconds to store, the next waits at least ``t / STORAGE_SHARE``.
STORAGE_SHARE = 0.25
#: The bound on what a crash can lose (README, "What a crash can cost"). A checkpoint
#: persisted (:meth:`Journal.soon`) and a trial that settled (TERMINATED, ERROR, a
#: settled pause: :meth:`Journal.urgent`) are in storage within this many seconds of the
#: loop learning of them, whatever ``journal_interval`` is (it paces plain results
#: only), so a driver killed later resumes each trial from that checkpoint or a newer
#: one and never runs a finished trial again. It is what the writer schedules for, so
#: it holds while storage takes a write in well under this (a write in flight finishes
#: first) and building one takes under ``URGENT_CPU_SHARE`` of it in CPU (the journal's
#: share of the driver's CPU comes first). Measured on a 2-core machine at load 30-48
#: (20 trials checkpointing every 5 steps of 5 ms, local storage): a checkpoint was
#: journaled 0.45 s after the loop learned of it (median), 1.1 s (p99), 1.9 s at most
#: (behind one write that itself took 1.1 s); before this bound 0.57 / 1.9 / 2.6 s.
DURABLE_WITHIN_S = 1.0
#: An urgent write (a trial just settled: see :meth:`Journal.urgent`) waits this long,
#: so that trials ending together share one write...
URGENT_DELAY = 0.05
#: ...and, like every write that an event hurries, comes at least the CPU the last
#: write cost divided by this after it: even a stream of trials ending (or checkpoints
#: persisted) one after another keeps the journal under a quarter of a core.
URGENT_CPU_SHARE = 0.25


class WritePace:
    """The journal's clock: when its last write ended, what it cost, and what the loop
    asked for since (see the module docstring)."""

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._pause = interval  # before the next write, from the last one's cost
        self._written_at = -math.inf  # when the last write ended (monotonic)
        self._write_s = 0.0  # a write's wall time, capture to commit (a decaying peak)
        self._cpu_gap = URGENT_DELAY  # before a hurried write, from the last one's CPU
        # When the loop first asked, since the last write's capture, for a write soon
        # (a checkpoint persisted) or at once (a trial settled); None: it did not.
        self._soon_at: float | None = None
        self._urgent_at: float | None = None
        self._hurried = asyncio.Event()  # either was asked: the writer reckons again

    def urgent(self) -> None:
        """A write at once (after :data:`URGENT_DELAY`): a trial settled."""
        if self._urgent_at is None:
            self._urgent_at = time.monotonic()
            self._hurried.set()

    def soon(self) -> None:
        """A write within :data:`DURABLE_WITHIN_S`: a checkpoint persisted."""
        if self._soon_at is None:
            self._soon_at = time.monotonic()
            self._hurried.set()

    def capturing(self) -> float:
        """A write captures the state now: what was asked for is in it. Its start."""
        self._soon_at = self._urgent_at = None
        return time.monotonic()

    def wrote(self, began: float, cpu: float, stored: float) -> None:
        """A write that began at ``began`` cost ``cpu`` CPU-seconds to build and took
        ``stored`` seconds to store: the pauses after it."""
        self._pause = max(self._interval, cpu / WRITE_SHARE, stored / STORAGE_SHARE)
        self._cpu_gap = max(URGENT_DELAY, cpu / URGENT_CPU_SHARE)
        # A decaying peak: one quick write among slow ones must not promise the next
        # is quick too.
        self._write_s = max(time.monotonic() - began, 0.8 * self._write_s)

    def ended(self, at: float) -> None:
        """The last write ended (or was skipped) at ``at``: pauses count from there."""
        self._written_at = at

    async def rest(self) -> None:
        """Wait until the next write is due (:meth:`due`), reckoned again whenever
        :meth:`soon` or :meth:`urgent` hurries it."""
        while True:
            left = self.due() - time.monotonic()
            if left <= 0:
                return
            self._hurried.clear()
            with contextlib.suppress(TimeoutError):
                await within(left, self._hurried.wait())

    def due(self) -> float:
        """When the next write starts: the pause after the last one (plain results),
        unless an urgent request (:data:`URGENT_DELAY` after it) or a checkpoint that must
        land within :data:`DURABLE_WITHIN_S` comes first (its write starts that long after
        it, less twice what a write takes: this one's, and one in flight); a hurried
        write waits at least the CPU gap after the last one."""
        due = self._written_at + self._pause
        earliest = self._written_at + self._cpu_gap
        if self._urgent_at is not None:
            due = min(due, max(self._urgent_at + URGENT_DELAY, earliest))
        if self._soon_at is not None:
            # Room for this write and for one in flight when it was asked for.
            wait = max(URGENT_DELAY, DURABLE_WITHIN_S - 2 * self._write_s)
            due = min(due, max(self._soon_at + wait, earliest))
        return due
