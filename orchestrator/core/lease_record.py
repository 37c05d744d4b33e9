"""The experiment lease as data: who drives an experiment, and the rules that say
whether a newcomer may take it over. Sans-IO: no storage, no clock, no asyncio
(:mod:`orchestrator.api.lease` does the I/O).

One experiment has one driver. Its lease is one small object in the experiment's
storage (:data:`LEASE_KEY`) naming the driver (host, pid, user, a random token) and when
it took and last renewed the lease; the driver renews it every ``ttl / 3`` seconds.
A newcomer may take the lease when there is none, when it has *expired* (not renewed
for ``ttl`` seconds by the newcomer's wall clock: the driver crashed, hung, or lost its
storage), or at once when the driver's process is known to be gone (the same machine
and process namespace, and no process with its pid and start time). A driver whose
lease was not renewed for :func:`fence_after` seconds (two thirds of ``ttl``) stops
writing until a renewal succeeds, so it has stopped before anyone may take over even
with clocks a third of ``ttl`` apart.
"""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass, replace
from datetime import datetime

__all__ = [
    "DEFAULT_TTL_S",
    "LEASE_KEY",
    "MIN_TTL_S",
    "Holder",
    "LeaseRecord",
    "Standing",
    "Verdict",
    "ago",
    "fence_after",
    "held_by",
    "judge",
    "locked_message",
    "renew_every",
    "same_process_space",
    "when",
]

#: The lease's key in the experiment's storage (beside ``experiment_state.json``).
LEASE_KEY = "experiment_lease.json"
#: Seconds a lease lives without renewal. A crashed driver on another machine holds its
#: experiment this long; a renewal costs one small conditional write every ttl / 3.
DEFAULT_TTL_S = 30.0
#: The shortest ttl a renewal can keep. A renewal (one small conditional write: a few ms
#: on a local disk, ~0.1 s to S3 or GCS, more after a retry, whose delays start at
#: 0.1 s) must land within ``ttl / 3`` of the one before, or the driver stops writing
#: (:func:`fence_after`). A second per renewal leaves room for one retried request and a
#: busy loop; below that a driver fences itself off and never runs a trial.
MIN_TTL_S = 3.0
FORMAT = 1


def renew_every(ttl: float) -> float:
    return ttl / 3


def fence_after(ttl: float) -> float:
    """Seconds without a renewal after which a driver stops writing (two renewals
    missed): a third of ``ttl`` before anyone else may take the lease."""
    return ttl * 2 / 3


@dataclass(frozen=True)
class Holder:
    """A driver process. ``boot_id``, ``pid_ns`` and ``started`` (its start time, in
    clock ticks since boot) tell whether another process on the same machine can see
    it and whether a pid still means it; None where the system does not say."""

    host: str
    pid: int
    user: str
    token: str
    boot_id: str | None = None
    pid_ns: str | None = None
    started: str | None = None

    def describe(self) -> str:
        return f"pid {self.pid} on host {self.host!r} (user {self.user})"


@dataclass(frozen=True)
class LeaseRecord:
    holder: Holder
    acquired_at: float  # wall-clock seconds (epoch) of the holder
    renewed_at: float
    ttl: float

    @property
    def expires_at(self) -> float:
        return self.renewed_at + self.ttl

    def renewed(self, now: float) -> LeaseRecord:
        return replace(self, renewed_at=now)

    def to_json(self) -> bytes:
        doc = {"format": FORMAT, **asdict(self)}
        return json.dumps(doc, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> LeaseRecord:
        """Raise ValueError on anything but a lease record."""
        try:
            doc = json.loads(data)
            known = {k: v for k, v in doc["holder"].items() if k in _HOLDER_FIELDS}
            holder = Holder(**known)  # fields a later version adds are ignored
            record = cls(
                holder, float(doc["acquired_at"]), float(doc["renewed_at"]), float(doc["ttl"])
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ValueError(f"not a lease record: {err}") from err
        if not isinstance(holder.token, str) or not isinstance(holder.pid, int):
            raise ValueError("not a lease record: bad holder")
        return record


_HOLDER_FIELDS = frozenset(Holder.__dataclass_fields__)


class Standing(enum.Enum):
    FREE = "free"  # no lease
    OURS = "ours"  # this driver's own (its token)
    HELD = "held"  # another live driver's
    STALE = "stale"  # another driver's, expired or its process gone


@dataclass(frozen=True)
class Verdict:
    standing: Standing
    reason: str = ""


def same_process_space(a: Holder, b: Holder) -> bool:
    """Whether ``a`` can judge ``b``'s pid: same machine, same boot, same pid namespace
    (two containers on one host, or two hosts sharing an NFS mount, cannot)."""
    return (
        a.host == b.host
        and a.boot_id is not None
        and a.boot_id == b.boot_id
        and a.pid_ns is not None
        and a.pid_ns == b.pid_ns
    )


def judge(
    record: LeaseRecord | None, *, me: Holder, now: float, holder_alive: bool | None
) -> Verdict:
    """Whether ``me`` may take the lease ``record`` describes, at wall time ``now``.
    ``holder_alive``: whether its process runs (None: cannot tell from here)."""
    if record is None:
        return Verdict(Standing.FREE)
    if record.holder.token == me.token:
        return Verdict(Standing.OURS)
    if holder_alive is False:
        return Verdict(Standing.STALE, f"its process {record.holder.pid} is gone")
    if now >= record.expires_at:
        return Verdict(
            Standing.STALE,
            f"it expired {ago(now - record.expires_at)} ago (not renewed for "
            f"{ago(now - record.renewed_at)})",
        )
    return Verdict(Standing.HELD)


def ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S")


def held_by(record: LeaseRecord, now: float) -> str:
    """The holder and its lease's times, for messages."""
    return (
        f"{record.holder.describe()}, since {when(record.acquired_at)} "
        f"({ago(now - record.acquired_at)} ago), lease renewed {ago(now - record.renewed_at)} "
        f"ago"
    )


def locked_message(record: LeaseRecord, *, name: str, uri: str, now: float) -> str:
    expires_in = record.expires_at - now
    return (
        f"experiment {name!r} at {uri} is in use by another driver: "
        f"{held_by(record, now)}. One experiment has one driver at a time. If that driver "
        f"is gone (its machine died, or it hangs), its lease expires {ago(record.ttl)} "
        f"after its last renewal, in {ago(expires_in)}: run again then, or pass "
        "take_over=True (command line: --take-over) to take the experiment now; a driver "
        "that still runs then stops at its next renewal (LeaseLost) without writing more"
    )
