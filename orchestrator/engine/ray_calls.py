"""The driver's small Ray calls: actor options from a trial's resources, what an actor
reserves in Ray's names, and killing an actor that may already be gone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ray

__all__ = ["actor_options", "kill", "ray_demand"]


def actor_options(resources: Mapping[str, float]) -> dict[str, Any]:
    options: dict[str, Any] = {"max_restarts": 0, "max_task_retries": 0}
    custom: dict[str, float] = {}
    for name, amount in resources.items():
        lowered = name.lower()
        if lowered == "cpu":
            options["num_cpus"] = amount
        elif lowered == "gpu":
            options["num_gpus"] = amount
        elif lowered == "memory":
            options["memory"] = amount
        else:
            custom[name] = amount
    options.setdefault("num_cpus", 1)
    if custom:
        options["resources"] = custom
    return options


def kill(actor: Any) -> None:
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # already gone, or Ray is shutting down
        pass


def ray_demand(resources: Mapping[str, float], trials: int) -> dict[str, float]:
    """What an actor for ``trials`` trials asking ``resources`` reserves, in Ray's names."""
    options = actor_options({k: v * trials for k, v in resources.items()})
    demand = {"CPU": float(options["num_cpus"])}
    if "num_gpus" in options:
        demand["GPU"] = float(options["num_gpus"])
    if "memory" in options:
        demand["memory"] = float(options["memory"])
    demand.update(options.get("resources", {}))
    return {k: v for k, v in demand.items() if v > 0}
