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

This module keeps the writer's book of them (:class:`SealedBook`: which objects the
head lists, which holds each trial, which trials wait; on the loop, bookkeeping only),
plans a write's (:func:`plan`) and reads them back (:func:`read_listed`, checked
against the head).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.core.journal_format import JOURNAL_KEY, SEALED_PREFIX
from orchestrator.journal.damage import damaged, parse_sealed, sealed_list

if TYPE_CHECKING:
    from orchestrator.journal.spill import SpillRef
    from orchestrator.journal.write_bytes import Built, Write

__all__ = ["SEAL_FANOUT", "Listed", "SealedBook", "plan", "read_listed"]

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


class SealedBook:
    """Which sealed objects the head in storage lists, which of them holds each trial's
    part (by the trial's position in the writer's order; -1: none, its part is live or
    waits), the positions each object was written with, and the sealed trials that wait
    for the next write's object. Changed only on the loop; what a write stores is
    recorded once its head is (:meth:`committed`); one write at a time."""

    def __init__(self, token: str) -> None:
        self._token = token
        self.listed: list[Listed] = []
        self._object_of = array("i")  # 4 bytes a trial
        self._members: dict[int, array[int]] = {}
        self._waiting: list[int] = []
        self._next = 0
        self._kept: list[Listed] = []  # what the write in flight keeps listing

    def track(self) -> None:
        """A new trial, at the next position."""
        self._object_of.append(-1)

    def comes_back(self, position: int) -> bool:
        """The trial at ``position`` is a live part again; True when a listed object held
        it (its live part overrides that copy from now on)."""
        if self._object_of[position] < 0:
            return False
        self._object_of[position] = -1
        return True

    def wait(self, position: int) -> None:
        """The trial at ``position`` was sealed: into the next write's object."""
        self._waiting.append(position)

    def plan_write(
        self,
        write: Write,
        parts: Sequence[str | None],
        where: tuple[Sequence[int], Sequence[int]],
        ids: Sequence[str],
        results: Mapping[str, list[str] | SpillRef],
    ) -> None:
        """Fill in what ``write`` does with sealed objects (:func:`plan`): the ones it
        keeps listing, and the one it writes, holding the trials sealed since the last
        write (whose ``parts[p]`` is still None: sealed, not back) and those of
        the objects it merges, each as it is now (a copy overridden since, by a live
        part or a later object, is dropped); ``where``: each part's offset and length in
        the heads file, ``results`` each trial's rows."""
        object_of = self._object_of
        waiting = [
            *dict.fromkeys(p for p in self._waiting if parts[p] is None and object_of[p] < 0)
        ]
        self._waiting = []
        kept, level = plan(self.listed, bool(waiting))
        self._kept, write.listed = kept, [o.to_json() for o in kept]
        if level is None:
            return
        positions = list(waiting)
        for merged in self.listed[len(kept) :]:
            serial = merged.serial
            positions += [p for p in self._members.get(serial, ()) if object_of[p] == serial]
        at, length = where
        write.sealed = [(p, at[p], length[p], results[ids[p]]) for p in sorted(positions)]
        write.sealing = waiting
        write.sealed_key = f"{SEALED_PREFIX}/{self._token}-{self._next:06d}.jsonl"
        write.sealed_level, write.sealed_serial = level, self._next
        self._next += 1

    def failed(self, write: Write) -> None:
        """``write``'s head was not stored (or not recorded): its trials wait again."""
        self._waiting[:0] = write.sealing

    def committed(self, write: Write, built: Built) -> bool:
        """``write``'s head is stored: record the objects it lists; True when it no longer
        lists some that the head before did (merged: delete them)."""
        kept = {o.key for o in self._kept}
        merged = any(o.key not in kept for o in self.listed)
        entry = built.sealed_entry
        if entry is None:
            return merged
        serial = write.sealed_serial
        members = array("i", (position for position, _, _, _ in write.sealed))
        for position in members:
            self._object_of[position] = serial
        for old in self.listed:
            if old.key not in kept:
                self._members.pop(old.serial, None)
        self._members[serial] = members
        new = Listed(
            entry["key"], entry["bytes"], entry["sha256"], entry["level"], serial, entry["trials"]
        )
        self.listed = [*self._kept, new]
        return merged


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
