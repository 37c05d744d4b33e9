"""Checking a sweep's arguments before any trial starts, and building the sweep.

Every mistake in a ``sweep(...)`` call (a bad space, a searcher that is not one, a
scheduler without a metric, a per-trial option out of range) is reported here, at the
call, naming what is wrong, so that no trial of a doomed sweep ever runs. The call itself
is recorded (pickled) for the journal, so that a resumed driver's same call continues it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from orchestrator.core.options import TrialOptions
    from orchestrator.search import Searcher, SearchSpace
    from orchestrator.sweeps.driver import Sweep
    from orchestrator.sweeps.port import SweepPort


@dataclass(frozen=True)
class SweepPlan:
    space: SearchSpace
    searcher: Searcher


def check_sweep(
    port: SweepPort,
    *,
    trainable: Any,
    space: Any,
    num_samples: Any,
    metric: Any,
    mode: Any,
    searcher: Any,
    scheduler: Any,
    max_concurrent_trials: Any,
    seed: Any,
    name: Any,
    options: TrialOptions,
) -> SweepPlan:
    from orchestrator.schedulers import Scheduler
    from orchestrator.search import RandomSearch, Searcher, SearchSpace

    where = f"sweep {name!r}" if isinstance(name, str) else "sweep"
    if not isinstance(name, str) or not name or "/" in name:
        raise ConfigError(f"sweep name must be a non-empty str without '/', got {name!r}")
    if not isinstance(space, Mapping):
        raise ConfigError(f"{where}: space must be a dict of keys to values or domains")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
        raise ConfigError(f"{where}: num_samples must be an int >= 1, got {num_samples!r}")
    if metric is not None and not isinstance(metric, str):
        raise ConfigError(f"{where}: metric must be a result key (str), got {metric!r}")
    if mode not in (None, "min", "max"):
        raise ConfigError(f"{where}: mode must be 'min' or 'max', got {mode!r}")
    if (metric is None) != (mode is None):
        raise ConfigError(f"{where}: give metric and mode together (got {metric=}, {mode=})")
    if max_concurrent_trials is not None and (
        isinstance(max_concurrent_trials, bool)
        or not isinstance(max_concurrent_trials, int)
        or max_concurrent_trials < 1
    ):
        raise ConfigError(
            f"{where}: max_concurrent_trials must be an int >= 1 or None (what the cluster "
            f"holds), got {max_concurrent_trials!r}"
        )
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ConfigError(f"{where}: seed must be an int or None, got {seed!r}")
    checked_space = SearchSpace(space)  # every bad domain, named by its key
    if searcher is None:
        searcher = RandomSearch(seed)
    elif not isinstance(searcher, Searcher):
        raise ConfigError(
            f"{where}: searcher must be an orchestrator.search.Searcher (RandomSearch(), "
            f"OptunaSearch()...), got {type(searcher).__name__}"
        )
    if scheduler is not None:
        if not isinstance(scheduler, Scheduler):
            raise ConfigError(
                f"{where}: scheduler must be an orchestrator.schedulers.Scheduler (ASHA(), "
                f"PBT()...), got {type(scheduler).__name__}"
            )
        scheduler.set_search_properties(metric, mode)
    # A dry run of one trial's spec: the trainable with the options (checked when they
    # were built), and resources given as a function of the config.
    probe = checked_space.sample(random.Random(0), checked_space.grid_points[0])
    port.trial_spec(trainable, probe, options.for_config(probe), f"{name}-check")
    return SweepPlan(checked_space, searcher)


def plan_sweep(
    port: SweepPort,
    *,
    journaled: Mapping[str, Any] | None,
    reuse_actors: Any,
    options: TrialOptions,
    fail_fast: Any = False,
    **call: Any,
) -> Sweep:
    """``Orchestrator.sweep``'s arguments, checked (``call``: :func:`check_sweep`'s), as a
    :class:`Sweep` ready to run; ``journaled`` is the same sweep's journal document when
    a resumed experiment holds one."""
    from orchestrator.core.codec import pickle_b64
    from orchestrator.sweeps.driver import Sweep

    plan = check_sweep(port, options=options, **call)
    name = call["name"]
    if not isinstance(fail_fast, bool):
        raise ConfigError(f"sweep {name!r}: fail_fast must be True or False, got {fail_fast!r}")
    if journaled is not None:
        check_continues(journaled, name, call["trainable"])
    recorded = {**call, "space": dict(call["space"]), "searcher": plan.searcher}
    return Sweep(
        port,
        name=name,
        trainable=call["trainable"],
        space=plan.space,
        num_samples=call["num_samples"],
        metric=call["metric"],
        mode=call["mode"],
        searcher=plan.searcher,
        scheduler=call["scheduler"],
        max_concurrent=call["max_concurrent_trials"],
        options=options,
        seed=call["seed"],
        reuse_actors=bool(reuse_actors),
        fail_fast=fail_fast,
        call=pickle_b64(
            {**recorded, "reuse_actors": reuse_actors, "fail_fast": fail_fast, **options.keywords()}
        ),
        journaled=journaled,
    )


def check_continues(doc: Mapping[str, Any], name: str, trainable: Any) -> None:
    """A resumed experiment's ``sweep(name=...)`` call continues the journaled sweep of
    that name, whose trials ran another trainable: refuse rather than mix the two."""
    from orchestrator.core.naming import trainable_identity

    journaled, given = doc.get("trainable"), trainable_identity(trainable)
    if journaled and journaled != given:
        raise ConfigError(
            f"sweep {name!r}: the journal holds this sweep with trainable {journaled}, and "
            f"this call gives {given}; the same name continues the same sweep: pass its "
            "trainable, or another name for a new sweep"
        )
