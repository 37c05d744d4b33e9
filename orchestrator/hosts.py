"""Which trial actor hosts which trials.

By default every trial gets an actor (a worker process) of its own. Starting a Ray
worker costs about a CPU-second here, which for short or light trials is most of their
cost, so ``trials_per_worker=N`` lets up to N trials that ask for the same resources
share one actor: one process start instead of N, the actor reserving the sum of its
trials' resources. A trial's exception still fails only that trial; the death of the
process fails all of its trials, and each recovers on its own.

Sizing: trials that start together are spread evenly over as few actors as the limit
allows, each actor sized for the trials it got. A trial that leaves (stops, pauses or
fails) frees its slot, which a later trial with the same resources may take, e.g. the
same trial restarting after an exception: it then skips the process start as well.
An actor with no trials left is retired and never gets a new one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

ResourceKey = Hashable


@dataclass(eq=False)
class Host:
    """One trial actor and the trials it hosts."""

    actor: Any
    key: ResourceKey
    capacity: int
    members: set[str] = field(default_factory=set)
    alive: bool = True

    @property
    def free(self) -> int:
        return self.capacity - len(self.members) if self.alive else 0


def resource_key(resources: Mapping[str, float]) -> ResourceKey:
    return tuple(sorted((name.lower(), float(amount)) for name, amount in resources.items()))


class HostPool:
    """Places trials on actors; ``create(resources, n)`` makes an actor for n trials."""

    def __init__(
        self, trials_per_worker: int, create: Callable[[Mapping[str, float], int], Any]
    ) -> None:
        if trials_per_worker < 1:
            raise ValueError(f"trials_per_worker must be >= 1, got {trials_per_worker}")
        self.trials_per_worker = trials_per_worker
        self._create = create
        self._open: dict[ResourceKey, list[Host]] = {}  # hosts that may take more trials

    def place(self, trial_ids: list[str], resources: Mapping[str, float]) -> list[Host]:
        """Hosts for ``trial_ids`` (all asking for ``resources``), one per trial, in order.

        Free slots of existing actors are used first; the rest are spread evenly over
        new actors. ``create`` errors propagate (no trial is then placed).
        """
        key = resource_key(resources)
        placed: list[Host] = []
        for host in self._open.get(key, []):
            while host.free and len(placed) < len(trial_ids):
                placed.append(host)
                host.members.add(trial_ids[len(placed) - 1])
        remaining = len(trial_ids) - len(placed)
        if remaining:
            per = self.trials_per_worker
            count = -(-remaining // per)
            sizes = [remaining // count + (1 if i < remaining % count else 0) for i in range(count)]
            new_hosts = [Host(self._create(resources, size), key, size) for size in sizes]
            for host, size in zip(new_hosts, sizes, strict=True):
                for _ in range(size):
                    placed.append(host)
                    host.members.add(trial_ids[len(placed) - 1])
            if per > 1:
                self._open.setdefault(key, []).extend(new_hosts)
        self._forget_full()
        return placed

    def leave(self, host: Host, trial_id: str) -> bool:
        """``trial_id`` no longer uses ``host``; True when that was its last trial (the
        caller then retires the actor: it never gets another trial)."""
        host.members.discard(trial_id)
        if host.members:
            if host.alive and host.capacity > 1:
                hosts = self._open.setdefault(host.key, [])
                if host not in hosts:
                    hosts.append(host)
            return False
        host.alive = False
        self._drop(host)
        return True

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
