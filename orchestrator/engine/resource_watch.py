"""Warning about trials that wait for resources no node of the cluster has.

A trial asking for ``{"cpu": 64}`` on a 4-CPU cluster, or a GPU on none, would wait
forever with nothing said but Ray's autoscaler line. Every few seconds this looks at the
trials whose actor has waited longer than :data:`UNPLACEABLE_AFTER_S`, compares what
their actor reserves with each live node's total resources (read in a thread), and
warns about those no node could ever hold, naming the trial, what it asked for and what
the largest node has; again every :data:`UNPLACEABLE_REPEAT_S`. A trial that fits some
node only waits its turn and is not warned about.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.core.machine import TrialState
from orchestrator.engine.ray_calls import ray_demand

if TYPE_CHECKING:
    from orchestrator.engine.trial_runtime import TrialRuntime

log = logging.getLogger("orchestrator.engine.loop")

UNPLACEABLE_AFTER_S = 3.0
UNPLACEABLE_REPEAT_S = 60.0


class ResourceWatch:
    """Looks, every few seconds while ``is_running()``, at the trials in ``waiting``
    (trial id -> since when its actor waits) among ``trials``; ``nodes`` reads the
    cluster's nodes as ``ray.nodes()`` does."""

    def __init__(
        self,
        trials: Mapping[str, TrialRuntime],
        waiting: dict[str, float],
        is_running: Callable[[], bool],
        nodes: Callable[[], Sequence[Mapping[str, Any]]],
    ) -> None:
        self._trials = trials
        self._nodes = nodes
        self._waiting = waiting
        self._is_running = is_running
        self._warned: dict[str, float] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        loop.call_later(UNPLACEABLE_AFTER_S, self._check)

    def _check(self) -> None:
        loop = self._loop
        if loop is None or not self._is_running():
            return
        now = loop.time()
        waiting = self._waiting
        due = []
        for trial_id, since in list(waiting.items()):
            rt = self._trials.get(trial_id)
            if rt is None or rt.node_id is not None or rt.state is not TrialState.STARTING:
                del waiting[trial_id]  # ready, or gone
                continue
            last = self._warned.get(trial_id, -UNPLACEABLE_REPEAT_S)
            if now - since >= UNPLACEABLE_AFTER_S and now - last >= UNPLACEABLE_REPEAT_S:
                due.append(rt)
        if due:
            loop.create_task(self._warn(due)).add_done_callback(_log_crash)
        loop.call_later(UNPLACEABLE_AFTER_S, self._check)

    async def _warn(self, trials: list[TrialRuntime]) -> None:
        nodes = await asyncio.to_thread(self._nodes)
        totals = [dict(n.get("Resources") or {}) for n in nodes if n.get("Alive")]
        assert self._loop is not None
        for rt in trials:
            demand = ray_demand(rt.spec.resources, rt.host.capacity if rt.host else 1)
            if any(all(node.get(k, 0.0) >= v for k, v in demand.items()) for node in totals):
                continue  # it fits a node: it waits its turn, as it should
            self._warned[rt.id] = self._loop.time()
            largest = max(totals, key=lambda n: n.get("CPU", 0.0), default={})
            shown = {k: v for k, v in largest.items() if not k.startswith("node:")}
            log.warning(
                "trial %s asks for %s, but no node of the Ray cluster has that much (the "
                "largest: %s); it waits until a node that can hold it joins. Ignore this if "
                "the cluster is autoscaling; otherwise ask for less",
                rt.id,
                _shown(demand),
                _shown(shown),
            )


def _shown(resources: Mapping[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(resources.items())) + "}"


def _log_crash(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("checking the cluster's resources failed: %s", task.exception())
