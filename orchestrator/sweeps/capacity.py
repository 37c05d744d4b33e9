"""How many of a sweep's trials may hold an actor at once, and each trial's shape.

``max_concurrent_trials`` when given; otherwise as many trials as the cluster's
resources hold, re-read every ``CAPACITY_REFRESH_S`` so that nodes that join or leave
count. A trial's resources may be a function of its config (Ray Tune's
``with_resources(trainable, fn)``); the bound then uses the newest trial's shape.

Trials that ask Ray for nothing (a function driving a Ray Train run asks for no CPU:
Train places its workers itself, as one placement group) are not bounded by the
cluster's resources, and what their work will ask for is not known here: such a sweep
runs one trial at a time, and says so once, unless ``max_concurrent_trials`` is given.
Given, as many trials start; those whose gang does not fit wait for it in Train (Ray
places a placement group whole or not at all, so no trial holds part of a gang and
none holds a CPU the others need) while the others run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.core.options import TrialOptions
    from orchestrator.sweeps.port import SweepPort

log = logging.getLogger("orchestrator.sweeps.capacity")

#: Seconds between reads of the cluster's resources.
CAPACITY_REFRESH_S = 5.0


class Capacity:
    """The sweep's concurrency bound (see the module docstring)."""

    def __init__(
        self,
        port: SweepPort,
        max_concurrent: int | None,
        options: TrialOptions,
        name: str = "sweep",
    ) -> None:
        self._port = port
        self._name = name
        self._told_unbounded = False
        self._max_concurrent = max_concurrent
        self._options = options
        self._read: tuple[float, int] | None = None  # (when read, trials that fit)
        self._last_resources: Any = None  # the newest trial's, when resources is a function

    def options_for(self, config: Mapping[str, Any]) -> TrialOptions:
        """A new trial's options (:meth:`TrialOptions.for_config`); its shape is
        remembered."""
        options = self._options.for_config(config)
        self._last_resources = options.resources
        return options

    async def limit(self) -> int:
        if self._max_concurrent is not None:
            return self._max_concurrent
        now = time.monotonic()
        if self._read is None or now - self._read[0] > CAPACITY_REFRESH_S:
            self._read = (now, await self._cluster_fits())
        return self._read[1]

    async def _cluster_fits(self) -> int:
        """How many trials the cluster's resources hold at once (at least 1)."""
        from orchestrator.engine.ray_calls import ray_demand

        totals = await self._port.cluster_resources()
        shape = self._options.resources
        if callable(shape):  # resources by config: the last trial's shape
            shape = self._last_resources
        demand = ray_demand(shape or {"cpu": 1.0}, 1)
        fits = [int(totals.get(k, 0.0) // v) for k, v in demand.items() if v > 0]
        if not fits and not self._told_unbounded:
            self._told_unbounded = True
            log.warning(
                "sweep %r: its trials ask Ray for no resources (say, each drives a Ray Train "
                "run, whose workers Train places itself), so it runs one trial at a time: "
                "give max_concurrent_trials (how many trials' worker groups fit at once; "
                "a trial whose group does not fit yet waits without stalling the others)",
                self._name,
            )
        return max(1, min(fits)) if fits else 1
