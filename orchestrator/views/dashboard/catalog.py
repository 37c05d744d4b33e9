"""The experiments under one storage root, and one :class:`JournalTail` for each.

A request names an experiment by a URL segment. That text never reaches storage as it
is: only names this catalog found by listing the root are looked up, so a request
cannot make the server read anything but the journals of the experiments listed there.
An experiment is a folder directly under the root holding a journal head, its backup,
or a running driver's lease (a just-started experiment is listed before its first
journal write, with a message).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from orchestrator.core.journal_format import JOURNAL_KEY
from orchestrator.views.dashboard.payloads import summary
from orchestrator.views.dashboard.tail import BACKUP_KEY, LEASE_KEY, JournalTail
from storage import LocalStorage, Storage

__all__ = ["Catalog"]

#: Files whose presence makes a folder an experiment.
MARKERS = (JOURNAL_KEY, BACKUP_KEY, LEASE_KEY)
#: Seconds a listing of the root is reused (a listing of S3 or GCS reads every key).
LIST_TTL_S = 3.0
#: Seconds a head read for the experiments page is reused.
HEAD_TTL_S = 1.0
#: Heads read at once for the experiments page.
READ_CONCURRENCY = 8
#: An experiment's results are dropped from memory after this long unwatched.
IDLE_S = 600.0


class Catalog:
    """The experiments under ``store``'s root (see the module docstring)."""

    def __init__(self, store: Storage) -> None:
        self._store = store
        self._names: list[str] = []
        self._listed_at = -LIST_TTL_S
        self._list_lock = asyncio.Lock()
        self._tails: dict[str, JournalTail] = {}
        self.problem: str | None = None  # the root cannot be listed

    @property
    def uri(self) -> str:
        return self._store.uri

    async def names(self, *, fresh: bool = False) -> list[str]:
        """The experiment names, sorted; listed again when the listing is older than
        :data:`LIST_TTL_S` (or ``fresh`` and older than a tenth of it)."""
        async with self._list_lock:
            age = time.monotonic() - self._listed_at
            if age >= LIST_TTL_S or (fresh and age >= LIST_TTL_S / 10):
                try:
                    self._names = await self._list()
                    self.problem = None
                except Exception as err:  # storage down: keep the last listing
                    self.problem = f"cannot list the experiments in {self.uri}: {err}"
                self._listed_at = time.monotonic()
            return list(self._names)

    async def tail(self, name: str) -> JournalTail | None:
        """The tail of the experiment ``name``; None when no such experiment was listed
        (the root is listed again first when the name is new)."""
        if name not in self._tails:
            if name not in await self.names() and name not in await self.names(fresh=True):
                return None
            self._tails[name] = JournalTail(self._store, name, self._store.uri_for(name))
        return self._tails[name]

    async def summaries(self) -> list[dict[str, Any]]:
        """One summary per experiment, from heads read at most :data:`HEAD_TTL_S` ago."""
        self._forget_idle()
        limit = asyncio.Semaphore(READ_CONCURRENCY)

        async def one(name: str) -> dict[str, Any] | None:
            tail = await self.tail(name)
            if tail is None:
                return None
            async with limit:
                await tail.refresh(fresh_within=HEAD_TTL_S)
            return summary(name, tail)

        found = await asyncio.gather(*(one(n) for n in await self.names()))
        return [s for s in found if s is not None]

    def _forget_idle(self) -> None:
        now = time.monotonic()
        for tail in self._tails.values():
            if tail.loaded and now - tail.used_at > IDLE_S:
                tail.drop_results()

    async def _list(self) -> list[str]:
        if isinstance(self._store, LocalStorage):
            await self._store.open()
            return await asyncio.to_thread(_local_names, self._store.uri_for(""))
        found = set()
        for key in await self._store.list(""):
            name, sep, rest = key.partition("/")
            if sep and rest in MARKERS:
                found.add(name)
        return sorted(found)


def _local_names(root: str) -> list[str]:
    with os.scandir(root) as entries:
        return sorted(
            e.name
            for e in entries
            if e.is_dir(follow_symlinks=False)
            and not e.name.startswith(".")
            and any(os.path.isfile(os.path.join(root, e.name, m)) for m in MARKERS)
        )
