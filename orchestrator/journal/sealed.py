"""Sealed journal objects: settled trials' parts of the head, written once (format 3).

A write's head used to hold every trial's part, so its cost grew with every trial the
experiment ever had (issue 36: a megabyte a write at a thousand trivial trials). Now a
trial that is over and sealed (:mod:`orchestrator.journal.retirement`) goes, once, into
an immutable *sealed object* ``experiment_state.sealed/<token>-<n>.jsonl``: one line
``{"entry": <its part of the head>, "rows": [<its results>]}`` per trial. The object is
stored before the head that lists it, with its byte count and SHA-256 (a driver dying
in between leaves an unlisted object, deleted like an unlisted segment); the head holds
the live trials' parts and the list. A trial that comes back is a live part again,
which overrides its sealed copy (and is written again from its first result); a later
object's copy overrides an earlier one's.

Objects merge as an LSM tree's runs do: each has a level (0 when written); a write
whose new object would be the :data:`SEAL_FANOUT`-th of its level at the end of the
list writes, instead, one object of the next level holding what it seals and the
trials of the objects it replaces (rebuilt from the driver's heads and spill files, not
read back; overridden copies dropped), and the merged ones are deleted once a head
that no longer lists them is stored. So the head
lists at most ``(SEAL_FANOUT - 1)`` objects per level, a level holds
``SEAL_FANOUT`` times more writes than the one below, and a trial's part is rewritten
once per level: a write costs what changed times ``log_{SEAL_FANOUT}`` of the writes.

This module plans which objects a write stores (:func:`plan`, on the loop, bookkeeping
only) and reads them back (:func:`read_listed`, checked against the head).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.core.journal_format import JOURNAL_KEY
from orchestrator.journal.damage import damaged, parse_sealed, sealed_list

__all__ = ["SEAL_FANOUT", "Listed", "plan", "read_listed"]

#: Sealed objects of one level merged into one of the next.
SEAL_FANOUT = 8


@dataclass(frozen=True, slots=True)
class Listed:
    """A sealed object a head lists: its key, size, hash and level, and the serial the
    writer tracks its trials by."""

    key: str
    size: int
    sha256: str
    level: int
    serial: int
    trials: int  # how many trial entries it holds (``repair`` says how many were lost)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "bytes": self.size,
            "sha256": self.sha256,
            "level": self.level,
            "trials": self.trials,
        }


def plan(listed: list[Listed], sealing: bool) -> tuple[list[Listed], int | None]:
    """What a write does with the listed objects: the ones it keeps listing, and the
    level of the object it writes (None: it writes none). A new object (``sealing``:
    trials to seal) is level 0; while the last :data:`SEAL_FANOUT` objects (counting the
    new one) share a level, they merge into one of the next (the ones merged are those
    not in the first list)."""
    if not sealing:
        return list(listed), None
    kept, level = list(listed), 0
    while len(kept) >= SEAL_FANOUT - 1 and all(
        o.level == level for o in kept[-(SEAL_FANOUT - 1) :]
    ):
        del kept[-(SEAL_FANOUT - 1) :]
        level += 1
    return kept, level


async def read_listed(storage: Any, doc: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The records of every sealed object the head ``doc`` lists, in its order, each
    checked (:class:`~orchestrator.errors.JournalDamaged` naming a missing, short or
    altered one and the head that lists it)."""
    from storage import NotFound

    objects = []
    head = storage.uri_for(JOURNAL_KEY)
    for item in sealed_list(doc) or []:
        where = storage.uri_for(item["key"])
        try:
            data = await storage.read_bytes(item["key"])
        except NotFound as err:
            raise damaged(storage.uri, where, f"is missing (the head {head} lists it)") from err
        objects.append(parse_sealed(data, where, storage.uri, item))
    return objects
