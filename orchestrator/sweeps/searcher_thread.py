"""A sweep's searcher in a thread of its own.

Its calls run there one at a time and in order (Optuna's TPE slows as trials grow, and
the loop must serve every running trial meanwhile), and the newest pickle of its state
is kept for the journal: after every suggestion (so a resumed sweep never suggests for a
trial index twice) and after its other calls at most every ``SEARCHER_SNAPSHOT_S``.
Once the sweep's call has ended the thread is closed, and work that still comes (a
trial settling as the experiment closes after a cancelled call) is not queued: a
resumed sweep tells its searcher then.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from orchestrator.search import Searcher

log = logging.getLogger("orchestrator.sweeps.driver")

#: The searcher's state is saved after every suggestion, and after its other calls at
#: most this often (an Optuna study's state grows with its trials).
SEARCHER_SNAPSHOT_S = 1.0


class SearcherThread:
    """``searcher`` of sweep ``name``, called in its own thread (see the module docstring)."""

    def __init__(self, searcher: Searcher, name: str) -> None:
        self.searcher = searcher
        self._name = name
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"searcher-{name}")
        self.closed = False
        #: The newest pickle of the searcher's state (``core.codec.pickle_b64``).
        self.state: str | None = None
        self._snapshot_at = 0.0

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in the thread, awaited."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    def submit(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Queue ``fn(*args)`` in the thread, not awaited; False once closed."""
        if self.closed:
            return False
        asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        return True

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        """In the thread: a config, and the state right after."""
        config = self.searcher.suggest(trial_id)
        if config is not None:
            self.snapshot()
        return config

    def complete(self, trial_id: str, result: dict[str, Any] | None, error: bool) -> None:
        """In the thread: the trial's end, and the state if it is stale."""
        self.searcher.on_trial_complete(trial_id, result, error)
        if time.monotonic() - self._snapshot_at > SEARCHER_SNAPSHOT_S:
            self.snapshot()

    def snapshot(self) -> None:
        """In the thread: keep the searcher's state as it is now."""
        from orchestrator.core.codec import pickle_b64

        self.state = pickle_b64(self.searcher.get_state())
        self._snapshot_at = time.monotonic()

    async def close(self) -> None:
        """Keep the final state (a failure loses only a resume's searcher state), then
        take no more work."""
        try:
            await self.call(self.snapshot)
        except Exception as err:  # the sweep's outcome stands
            log.warning("sweep %r: could not save the searcher's state: %s", self._name, err)
        self.closed = True
        self._pool.shutdown(wait=False)
