"""Which actor hosts which trials: placement as plans.

By default every trial gets an actor (a worker process) of its own. Starting a Ray
worker costs about a CPU-second here, which for short or light trials is most of their
cost, so ``trials_per_worker=N`` lets up to N trials that ask for the same resources
share one actor: one process start instead of N, the actor reserving the sum of its
trials' resources. A trial's exception still fails only that trial; the death of the
process fails all of its trials, and each recovers on its own.

The pool only decides (the httpcore way): :meth:`HostPool.place` returns a
:class:`Placement` naming, for each trial, the host it goes to, and which of those hosts
are new (their actors are for the caller to create, then :meth:`HostPool.created`);
:meth:`HostPool.leave` says whether an emptied host must be retired or stays *idle*.
An idle host (``keep_idle``: actor reuse) is given to the next trial that asks for the
same resources, which then skips the process start; the caller retires idle hosts
nobody took (:meth:`HostPool.take_idle`).

Sizing: trials that start together are spread evenly over as few actors as the limit
allows, each actor sized for the trials it got. A trial that leaves (stops, pauses or
fails) frees its slot, which a later trial with the same resources may take, e.g. the
same trial restarting after an exception: it then skips the process start as well.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

ResourceKey = Hashable


@dataclass(eq=False)
class Host:
    """One trial actor and the trials it hosts (``actor`` is None until created)."""

    key: ResourceKey
    resources: Mapping[str, float]  # per trial
    capacity: int
    actor: Any = None
    members: set[str] = field(default_factory=set)
    alive: bool = True
    spare: bool = False  # a warm spare, started before any trial needed it

    @property
    def free(self) -> int:
        return self.capacity - len(self.members) if self.alive else 0

    @property
    def idle(self) -> bool:
        return self.alive and not self.members


@dataclass(frozen=True)
class Placement:
    """A plan: ``hosts[i]`` takes the i-th trial; ``new`` lists the hosts whose actors
    the caller must create (each sized ``capacity`` x ``resources``)."""

    hosts: list[Host]
    new: list[Host]
    spares_used: list[Host] = field(default_factory=list)


def resource_key(resources: Mapping[str, float]) -> ResourceKey:
    return tuple(sorted((name.lower(), float(amount)) for name, amount in resources.items()))


class HostPool:
    """Decides where trials go; never creates or kills an actor itself."""

    def __init__(self, trials_per_worker: int, *, keep_idle: bool = False) -> None:
        if trials_per_worker < 1:
            raise ValueError(f"trials_per_worker must be >= 1, got {trials_per_worker}")
        self.trials_per_worker = trials_per_worker
        self.keep_idle = keep_idle
        self._open: dict[ResourceKey, list[Host]] = {}  # hosts that may take more trials

    def place(self, trial_ids: list[str], resources: Mapping[str, float]) -> Placement:
        """Hosts for ``trial_ids`` (all asking for ``resources``), one per trial, in order.

        Free slots of existing actors (idle ones included) are used first; the rest are
        spread evenly over new hosts."""
        key = resource_key(resources)
        placed: list[Host] = []
        spares: list[Host] = []
        # Free slots of live actors first (the same process, nothing to start), then
        # warm spares; the rest on new actors.
        for host in sorted(self._open.get(key, []), key=lambda h: h.spare):
            while host.free and len(placed) < len(trial_ids):
                placed.append(host)
                host.members.add(trial_ids[len(placed) - 1])
                if host.spare:  # in use: an ordinary host from now on
                    host.spare = False
                    spares.append(host)
        new: list[Host] = []
        remaining = len(trial_ids) - len(placed)
        if remaining:
            per = self.trials_per_worker
            count = -(-remaining // per)
            sizes = [remaining // count + (1 if i < remaining % count else 0) for i in range(count)]
            new = [Host(key, dict(resources), size) for size in sizes]
            for host in new:
                for _ in range(host.capacity):
                    placed.append(host)
                    host.members.add(trial_ids[len(placed) - 1])
            if per > 1 or self.keep_idle:
                self._open.setdefault(key, []).extend(new)
        self._forget_full()
        return Placement(placed, new, spares)

    def created(self, host: Host, actor: Any) -> None:
        host.actor = actor

    def add_spare(self, host: Host) -> None:
        """A started, idle actor for the next trial asking for its resources (a
        restart after a failure, most likely): :meth:`place` takes it first."""
        host.spare = True
        self._open.setdefault(host.key, []).append(host)  # after free slots of live ones

    def add_idle(self, host: Host) -> None:
        """A started actor no trial uses yet, kept like a finished trial's under actor
        reuse (a sweep's workers started before its first trial): :meth:`place` takes
        it as a free slot of a live actor, :meth:`take_idle` retires it."""
        self._open.setdefault(host.key, []).append(host)

    def spares(self, key: ResourceKey | None = None) -> list[Host]:
        return [
            h
            for k, hosts in self._open.items()
            for h in hosts
            if h.spare and h.idle and (key is None or k == key)
        ]

    def failed(self, host: Host) -> None:
        """Its actor could not even be created: it takes no trial."""
        self.mark_dead(host)

    def leave(self, host: Host, trial_id: str, *, reusable: bool = True) -> bool:
        """``trial_id`` no longer uses ``host``; True when the host must be retired (that
        was its last trial, and idle hosts are not kept or this one is not
        ``reusable``: a trial that failed never hands on its process). An idle host that
        is kept waits for the next trial with the same resources (see :meth:`take_idle`)."""
        host.members.discard(trial_id)
        if host.members or (self.keep_idle and reusable and host.alive):
            if host.alive and (host.capacity > 1 or self.keep_idle):
                hosts = self._open.setdefault(host.key, [])
                if host not in hosts:
                    hosts.append(host)
            return False
        host.alive = False
        self._drop(host)
        return True

    def take_idle(self, *, spares: bool = False) -> list[Host]:
        """Every idle host (warm spares too only with ``spares``), now retired (no trial
        took it): the caller kills their actors."""
        idle = [
            h for hosts in self._open.values() for h in hosts if h.idle and (spares or not h.spare)
        ]
        for host in idle:
            host.alive = False
            self._drop(host)
        return idle

    def idle_hosts(self) -> list[Host]:
        return [h for hosts in self._open.values() for h in hosts if h.idle]

    def mark_dead(self, host: Host) -> None:
        """The actor died: no trial joins it any more (its trials fail on their own)."""
        host.alive = False
        self._drop(host)

    def _drop(self, host: Host) -> None:
        hosts = self._open.get(host.key)
        if hosts and host in hosts:
            hosts.remove(host)

    def _forget_full(self) -> None:
        for key in list(self._open):
            self._open[key] = [h for h in self._open[key] if h.free]
            if not self._open[key]:
                del self._open[key]
