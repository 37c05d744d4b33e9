"""Warm workers: started trial actors that no trial uses yet, per resource shape.

A worker process costs about a CPU-second to start here, which for short trials is
most of their cost, so the pool keeps started, idle actors where a trial will want one
soon. One mechanism serves three cases; an idle host is an idle host, whichever made it:

* **A sweep's workers** (:meth:`Spares.warm`). A sweep that reuses actors starts, the
  moment it begins and before its searcher is set up or asked for a config, as many
  workers as it will run trials at once (its concurrency, bounded by what the cluster
  has free), so their processes start while the sweep's own start-up runs; they join
  the pool as idle hosts (:meth:`HostPool.add_idle`), its first trials take them, and
  actor reuse keeps them for the trials after, until the sweep retires them.
* **Reuse.** A trial that ends leaves its host idle for the next trial of the same
  shape (``keep_idle``), which skips the process start.
* **Spares for restarts.** When trials may fail (``max_failures != 0``), the executor
  keeps ``spare_actors`` (default 1) idle actors per shape: a failed trial's restart or
  a PBT clone's new actor goes to one at once and a replacement starts in the
  background. An idle host that reuse kept counts as one: no process is started for a
  spare while one sits idle anyway.

A warm actor reserves its resources, so it is started only where they are free: when
the cluster's available resources hold it and (for a spare) no trial of that shape is
waiting for an actor (then that trial comes first). It never makes a full cluster
slower: with no room there is none. Spares of a shape are retired once no trial of
that shape can still fail (all settled), idle hosts when their sweep says no trial will
take them, and both with the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.core.machine import TrialState
from orchestrator.core.placement import Host, HostPool, ResourceKey, resource_key
from orchestrator.engine.ray_calls import RAY, RayBackend, ray_demand

if TYPE_CHECKING:
    from orchestrator.engine.trial_runtime import TrialRuntime

log = logging.getLogger("orchestrator.engine.loop")


class Spares:
    """Keeps ``count`` started, idle actors per resource shape in ``hosts`` (see the
    module docstring); ``create_actor`` starts one, ``trials`` lists the loop's trials,
    ``backend`` says what the cluster has free and kills."""

    def __init__(
        self,
        hosts: HostPool,
        create_actor: Callable[[Host], Any],
        trials: Callable[[], Iterable[TrialRuntime]],
        count: int,
        backend: RayBackend = RAY,
    ) -> None:
        self._hosts = hosts
        self._create_actor = create_actor
        self._backend = backend
        self._trials = trials
        self.count = count
        self._checking: set[ResourceKey] = set()
        self._again: dict[ResourceKey, dict[str, float]] = {}
        self.started = 0
        self.used = 0
        self.warmed = 0

    def consider(self, resources: Mapping[str, float]) -> None:
        """Start a spare for ``resources`` if one is missing and the cluster has room
        (checked in a thread; never on the loop)."""
        if self.count <= 0:
            return
        key = resource_key(resources)
        if key in self._checking:
            # Asked again while a check is under way (a restarted trial became ready
            # while the check that its placement asked for waits on its thread): look
            # once more when that check ends, or the answer may be the stale "no".
            self._again[key] = dict(resources)
            return
        if len(self._idle(key)) >= self.count:
            return
        if not self._wanted(key):
            return
        self._checking.add(key)
        task = asyncio.get_running_loop().create_task(self._maybe_start(key, dict(resources)))
        task.add_done_callback(lambda done: self._done(key, done))

    async def warm(self, resources: Mapping[str, float], count: int) -> int:
        """Have ``count`` started actors of shape ``resources`` (a sweep about to run
        ``count`` trials of it at once): start the ones missing now, as idle hosts,
        as many as the cluster's free resources hold. Returns how many it started."""
        key = resource_key(resources)
        available = await asyncio.to_thread(self._backend.available_resources)
        demand = ray_demand(resources, 1)
        fits = min((int(available.get(k, 0.0) // v) for k, v in demand.items()), default=0)
        # Counted after the wait: trials placed meanwhile have their actors already.
        missing = count - len(self._idle(key)) - len(self._busy(key))
        started = 0
        for _ in range(min(missing, fits)):
            host = Host(key, dict(resources), 1)
            self._hosts.add_idle(host)
            self._hosts.created(host, self._create_actor(host))
            started += 1
        self.warmed += started
        return started

    def note_taken(self, host: Host, resources: Mapping[str, float]) -> None:
        """A placement used ``host``, a spare until now: start its replacement."""
        self.used += 1
        self.consider(resources)

    def retire_unneeded(self) -> None:
        """Kill the spares of shapes no unsettled trial that may fail has any more."""
        for host in self._hosts.spares():
            if not self._wanted(host.key, waiting_ok=True):
                self._hosts.mark_dead(host)
                if host.actor is not None:
                    self._backend.kill(host.actor)

    def _idle(self, key: ResourceKey) -> list[Host]:
        """Started actors of shape ``key`` no trial uses: spares and kept ones alike."""
        return [h for h in self._hosts.idle_hosts() if h.key == key]

    def _busy(self, key: ResourceKey) -> set[int]:
        """The live actors of shape ``key`` that trials use (by identity)."""
        return {
            id(rt.host)
            for rt in self._trials()
            if rt.host is not None and rt.host.alive and rt.host.key == key
        }

    def _wanted(self, key: ResourceKey, *, waiting_ok: bool = False) -> bool:
        """Whether a trial of shape ``key`` may still fail, and (unless ``waiting_ok``)
        none of that shape waits for an actor (it must get the resources first)."""
        wanted = False
        for rt in self._trials():
            if rt.state.is_settled or resource_key(rt.spec.resources) != key:
                continue
            if rt.spec.max_failures == 0:
                continue
            if waiting_ok:
                return True
            if rt.state is TrialState.STARTING and rt.node_id is None:
                return False
            wanted = True
        return wanted

    async def _maybe_start(self, key: ResourceKey, resources: dict[str, float]) -> None:
        available = await asyncio.to_thread(self._backend.available_resources)
        demand = ray_demand(resources, 1)
        if not all(available.get(k, 0.0) >= v for k, v in demand.items()):
            return  # no room: a spare would only compete with trials
        if not self._wanted(key) or len(self._idle(key)) >= self.count:
            return
        host = Host(key, resources, 1)
        self._hosts.add_spare(host)
        self._hosts.created(host, self._create_actor(host))
        self.started += 1

    def _done(self, key: ResourceKey, task: asyncio.Task[Any]) -> None:
        self._checking.discard(key)
        if not task.cancelled() and task.exception() is not None:
            log.warning("starting a spare actor failed: %s", task.exception())
        again = self._again.pop(key, None)
        if again is not None and not task.cancelled():
            self.consider(again)
