"""Storage views that delay or count the journal's writes (the journal's tests)."""

from __future__ import annotations

import asyncio
import time

from orchestrator.core.journal_format import JOURNAL_KEY
from storage import Storage


class StorageView:
    """The journal's view of a real storage: everything passes through to it, except
    what a subclass overrides (``write_bytes``, in the tests here)."""

    def __init__(self, store: Storage) -> None:
        self.store = store

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)


class SlowWrites(StorageView):
    """The journal's view of a storage whose writes take ``delay`` seconds (a large
    journal on a slow bucket), writing through to a real one; ``started`` holds when
    each write of the head began (one per journal write; its backup goes beside it)."""

    def __init__(self, store: Storage, delay: float) -> None:
        super().__init__(store)
        self.delay = delay
        self.started: list[float] = []

    async def write_bytes(self, key: str, data: bytes) -> None:
        if key == JOURNAL_KEY:
            self.started.append(time.monotonic())
        await asyncio.sleep(self.delay)
        await self.store.write_bytes(key, data)


class CountedWrites(StorageView):
    """Records when each journal head was written."""

    def __init__(self, store: Storage) -> None:
        super().__init__(store)
        self.heads: list[float] = []

    async def write_bytes(self, key: str, data: bytes) -> None:
        await self.store.write_bytes(key, data)
        if key == JOURNAL_KEY:
            self.heads.append(time.monotonic())
