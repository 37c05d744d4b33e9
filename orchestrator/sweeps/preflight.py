"""Checking a sweep's arguments before any trial starts, and building the sweep.

Every mistake in a ``sweep(...)`` call (a bad space, a searcher that is not one, a
scheduler without a metric, a trainable that cannot take the trials' options) is
reported here, at the call, naming what is wrong, so that no trial of a doomed sweep
ever runs (a per-trial option out of range is, where the call builds its
:class:`~orchestrator.core.options.TrialOptions`). The call itself is recorded (pickled)
for the journal (:meth:`SweepCall.recorded`), so that a resumed driver's same call
continues it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.errors import ConfigError
from orchestrator.sweeps.call import SweepCall, SweepPlan

if TYPE_CHECKING:
    from orchestrator.sweeps.driver import Sweep
    from orchestrator.sweeps.port import SweepPort


def check_sweep(port: SweepPort, call: SweepCall) -> SweepPlan:
    from orchestrator.schedulers import Scheduler
    from orchestrator.search import RandomSearch, Searcher, SearchSpace
    from orchestrator.search.searcher import check_setup

    """Every mistake of ``call`` as a ConfigError, before any trial of it starts."""
    space, name, metric, mode = call.space, call.name, call.metric, call.mode
    searcher, scheduler, seed = call.searcher, call.scheduler, call.seed
    where = f"sweep {name!r}" if isinstance(name, str) else "sweep"
    if not isinstance(name, str) or not name or "/" in name:
        raise ConfigError(f"sweep name must be a non-empty str without '/', got {name!r}")
    if not isinstance(space, Mapping):
        raise ConfigError(f"{where}: space must be a dict of keys to values or domains")
    if metric is not None and not isinstance(metric, str):
        raise ConfigError(f"{where}: metric must be a result key (str), got {metric!r}")
    if mode not in (None, "min", "max"):
        raise ConfigError(f"{where}: mode must be 'min' or 'max', got {mode!r}")
    if (metric is None) != (mode is None):
        raise ConfigError(f"{where}: give metric and mode together (got {metric=}, {mode=})")
    bound = call.max_concurrent_trials
    if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 1):
        raise ConfigError(
            f"{where}: max_concurrent_trials must be an int >= 1 or None (what the cluster "
            f"holds), got {bound!r}"
        )
    # num_samples and seed by the rule every searcher's setup() applies (written once).
    check_setup(where, metric, mode, call.num_samples, seed)
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
    port.trial_spec(call.trainable, probe, call.options.for_config(probe), f"{name}-check")
    return SweepPlan(checked_space, searcher)


def plan_sweep(port: SweepPort, call: SweepCall, journaled: Mapping[str, Any] | None) -> Sweep:
    """``call`` checked, as a :class:`Sweep` ready to run; ``journaled`` is the same
    sweep's journal document when a resumed experiment holds one."""
    from orchestrator.sweeps.driver import Sweep

    plan = check_sweep(port, call)
    if not isinstance(call.fail_fast, bool):
        raise ConfigError(
            f"sweep {call.name!r}: fail_fast must be True or False, got {call.fail_fast!r}"
        )
    if journaled is not None:
        check_continues(journaled, call.name, call.trainable)
    return Sweep(port, call, plan, journaled)


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
