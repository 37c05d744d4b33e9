"""Keeping a watched experiment fresh: one poller per experiment, however many pages.

While at least one page streams an experiment, one task looks at its journal every
:data:`POLL_S` seconds (a local head that has not changed is not even read: its file's
identity, size and time are compared first) and wakes the pages' streams when the look
found something. When the last page leaves, the task ends: an experiment nobody
watches costs nothing. The journal is written at most about once a second, so a new
result reaches the page within about ``POLL_S`` plus one journal interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from orchestrator.timeouts import within
from orchestrator.views.dashboard.tail import JournalTail

__all__ = ["POLL_S", "Watch"]

log = logging.getLogger("orchestrator.views.dashboard")

#: Seconds between two looks at a watched experiment's journal.
POLL_S = 0.5


class Watch:
    """The poller of one experiment (see the module docstring)."""

    def __init__(self, tail: JournalTail, poll_s: float = POLL_S) -> None:
        self.tail = tail
        self._poll_s = poll_s
        self._watchers = 0
        self._task: asyncio.Task[None] | None = None
        self._news = asyncio.Event()
        self._announced = tail.version

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """Keep the experiment fresh while the block runs."""
        self._watchers += 1
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._poll(), name=f"dashboard poll {self.tail.uri}"
            )
        try:
            yield
        finally:
            self._watchers -= 1

    async def wait_beyond(self, version: int, timeout: float) -> bool:
        """Wait until the tail's version passes ``version`` (True) or ``timeout``
        seconds pass (False)."""
        while self.tail.version <= version:
            news = self._news
            try:
                await within(timeout, news.wait())
            except TimeoutError:
                return self.tail.version > version
        return True

    def wake(self) -> None:
        """Wake every waiter now (the server is closing)."""
        news, self._news = self._news, asyncio.Event()
        news.set()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _poll(self) -> None:
        while self._watchers > 0:
            try:
                await self.tail.refresh(results=True)
            except Exception:  # a bug, not the journal: keep serving what was read
                log.exception("reading the journal at %s", self.tail.uri)
            # Also what a page's own request read meanwhile (it refreshes the tail too).
            if self.tail.version != self._announced:
                self._announced = self.tail.version
                self.wake()
            await asyncio.sleep(self._poll_s)
