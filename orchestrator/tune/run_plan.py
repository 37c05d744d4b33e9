"""A Tuner's configs translated, once, into one ``Orchestrator(...)`` and one
``sweep(...)`` call: where each Tune knob goes (see README, "Coming from Ray Tune").

Everything is checked here, before Ray starts: an argument this facade cannot honour is
a :class:`~orchestrator.tune.error.TuneUnsupported` naming it, a wrong one a
``ConfigError`` with Tune's wording where Tune has one.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.core.locations import experiment_uri
from orchestrator.core.options import TrialOptions
from orchestrator.errors import ConfigError
from orchestrator.schedulers import Scheduler, scheduler_kinds
from orchestrator.tune.adapters import check_trainable, unwrap
from orchestrator.tune.config import CheckpointConfig, FailureConfig, RunConfig, TuneConfig
from orchestrator.tune.error import unsupported
from orchestrator.tune.sample import translate_space
from orchestrator.tune.schedulers.base import FIFOScheduler, TuneScheduler
from orchestrator.tune.search.basic_variant import BasicVariantGenerator
from orchestrator.tune.search.concurrency_limiter import ConcurrencyLimiter, Wrapper
from orchestrator.tune.search.searcher import engine_searcher
from orchestrator.tune.stopper import StopPlan, plan_stop
from orchestrator.tune.trainable import Trainable

__all__ = ["AT_END_ONLY", "RunPlan", "plan_run"]

#: ``checkpoint_every`` for ``checkpoint_at_end=True`` without a frequency: a period no
#: trial reaches, so its only checkpoint is the final save the engine makes when a trial
#: that checkpoints finishes or is stopped.
AT_END_ONLY = 2**62

DEFAULT_STORAGE = os.path.join("~", "ray_results")


@dataclass
class RunPlan:
    """The Orchestrator's and the sweep's arguments, and what the Tuner wires around:
    Tune's ``RunConfig(stop, checkpoint_config, failure_config)`` become one
    :class:`~orchestrator.core.options.TrialOptions`, checked here."""

    storage_path: str
    name: str
    sweep_name: str
    trainable: Any  # the user's function or class (unwrapped)
    wrapped: Any  # as given (with_parameters objects are put once Ray is up)
    space: dict[str, Any]
    num_samples: int
    metric: str | None
    mode: str | None
    searcher: Any
    scheduler: Scheduler | None
    max_concurrent: int | None
    stop: StopPlan
    #: Every trial's options (stop, checkpoints, retention, failures, resources), for
    #: ``sweep(options=...)``.
    trial: TrialOptions
    fail_fast: bool | str
    reuse_actors: bool
    progress: bool
    callbacks: list[Any]
    name_creator: Callable[[Any], str] | None
    dirname_creator: Callable[[Any], str] | None
    objectives: tuple[list[str], list[str]] | None = None

    @property
    def experiment_path(self) -> str:
        return experiment_uri(self.storage_path, self.name)


def _is_class(trainable: Any) -> bool:
    return isinstance(trainable, type) and issubclass(trainable, Trainable)


def _resources(resources: Any) -> Any:
    """Tune's resource names (``CPU``, ``GPU``...) as trialflow's (lower case)."""
    if resources is None:
        return None
    if callable(resources) and not isinstance(resources, Mapping):
        inner = resources
        return lambda config: _resources(inner(config))
    if not isinstance(resources, Mapping):
        raise unsupported(f"resources {resources!r}", "give a dict like {'cpu': 2, 'gpu': 1}")
    names = {"CPU": "cpu", "GPU": "gpu"}
    return {names.get(k, k): v for k, v in resources.items()}


def _searcher(tune_config: TuneConfig, space: Mapping[str, Any]) -> tuple[Any, int | None]:
    """The engine's searcher, and the concurrency bound it carries (None: none)."""
    search_alg = tune_config.search_alg
    if search_alg is None:
        search_alg = BasicVariantGenerator()
    bound: int | None = None
    inner = search_alg
    while isinstance(inner, Wrapper):
        if isinstance(inner, ConcurrencyLimiter):
            bound = inner.max_concurrent if bound is None else min(bound, inner.max_concurrent)
        inner = inner.searcher
    if isinstance(inner, BasicVariantGenerator) and inner.max_concurrent > 0:
        bound = inner.max_concurrent if bound is None else min(bound, inner.max_concurrent)
    asked = tune_config.max_concurrent_trials or None  # 0: no bound, as on Tune
    if asked is not None and isinstance(search_alg, ConcurrencyLimiter):
        if search_alg.max_concurrent != asked:
            raise ConfigError(
                f"You have specified `max_concurrent_trials={asked}`, but the `search_alg` "
                f"is already a `ConcurrencyLimiter` with `max_concurrent="
                f"{search_alg.max_concurrent}`. FIX THIS by setting "
                "`max_concurrent_trials=None`."
            )
    if asked is not None:
        bound = asked if bound is None else min(bound, asked)
    if isinstance(search_alg, Wrapper):
        search_alg.bind(space)
        return search_alg, bound
    return engine_searcher(search_alg, space), bound


def _objectives(search_alg: Any) -> tuple[list[str], list[str]] | None:
    inner = search_alg
    while isinstance(inner, Wrapper):
        inner = inner.searcher
    metric, mode = getattr(inner, "metric", None), getattr(inner, "mode", None)
    if isinstance(metric, (list, tuple)) and isinstance(mode, (list, tuple)):
        return list(metric), list(mode)
    return None


def _checkpoints(config: CheckpointConfig, is_class: bool) -> tuple[int, Any, Any]:
    """(checkpoint_every, keep_checkpoints, checkpoint_score)."""
    if not is_class and config.checkpoint_at_end:
        raise ConfigError(
            "'checkpoint_at_end' cannot be used with a function trainable. You should "
            "include one last call to `tune.report(metrics=..., checkpoint=...)` at the "
            "end of your training loop to get this behavior."
        )
    if not is_class and config.checkpoint_frequency:
        raise ConfigError(
            "'checkpoint_frequency' cannot be set for a function trainable. You will need "
            "to report a checkpoint every `checkpoint_frequency` iterations within your "
            "training loop using `tune.report(metrics=..., checkpoint=...)` to get this "
            "behavior."
        )
    every = int(config.checkpoint_frequency or 0)
    if is_class and config.checkpoint_at_end and every == 0:
        every = AT_END_ONLY
    score = None
    if config.checkpoint_score_attribute is not None:
        score = (config.checkpoint_score_attribute, config.checkpoint_score_order)
    return every, config.num_to_keep, score


#: ``num_samples=-1``: new samples until the run is stopped (a time budget, a stopper's
#: ``stop_all``, a searcher that finishes, or Ctrl-C), as on Tune.
UNTIL_STOPPED = 2**40


def plan_run(
    trainable: Any,
    param_space: Mapping[str, Any] | None,
    tune_config: TuneConfig | None,
    run_config: RunConfig | None,
    *,
    sweep_name: str | None = None,
) -> RunPlan:
    tune_config = tune_config or TuneConfig()
    run_config = run_config or RunConfig()
    if not isinstance(tune_config, TuneConfig):
        raise unsupported(f"tune_config={type(tune_config).__name__}", "use tune.TuneConfig(...)")
    if not isinstance(run_config, RunConfig):
        raise unsupported(f"run_config={type(run_config).__name__}", "use tune.RunConfig(...)")
    if param_space is not None and not isinstance(param_space, Mapping):
        raise ConfigError(
            "The `param_space` passed to the `Tuner` must be a dict. Got "
            f"'{type(param_space).__name__}' instead."
        )
    user, _, resources = unwrap(trainable, put=False)
    check_trainable(user)
    is_class = _is_class(user)
    name_of = str(getattr(user, "__name__", None) or type(user).__name__)
    space = dict(translate_space(dict(param_space or {})))
    search_alg = tune_config.search_alg
    inner = search_alg
    while isinstance(inner, Wrapper):
        inner = inner.searcher
    own_space = getattr(inner, "tune_space", None)
    if own_space:
        space = {**own_space, **space}
    searcher, bound = _searcher(tune_config, space)
    scheduler = tune_config.scheduler
    if scheduler is not None and not isinstance(scheduler, Scheduler):
        raise unsupported(
            f"scheduler={type(scheduler).__name__}",
            "use a scheduler from orchestrator.tune.schedulers ("
            + ", ".join(k.tune_classes[0] for k in scheduler_kinds() if k.tune_classes)
            + ") or an orchestrator.schedulers.Scheduler",
        )
    if isinstance(scheduler, TuneScheduler):  # Tune's metric clash, refused now
        scheduler.set_search_properties(tune_config.metric, tune_config.mode)
    stop = plan_stop(run_config.stop, tune_config.time_budget_s)
    if stop.driver is not None:
        scheduler = scheduler or FIFOScheduler()
        if not isinstance(scheduler, TuneScheduler):
            raise unsupported(
                f"a stateful stopper with the scheduler {type(scheduler).__name__}",
                "use the scheduler's class from orchestrator.tune.schedulers",
            )
    failure = run_config.failure_config or FailureConfig()  # checked when it was built
    every, keep, score = _checkpoints(run_config.checkpoint_config or CheckpointConfig(), is_class)
    if is_class and user.default_resource_request(dict(space)) is not None:
        raise unsupported(
            f"{user.__name__}.default_resource_request()",
            "use tune.with_resources(trainable, {...})",
        )
    timestamp = time.strftime("%Y-%m-%d_%H-%M-%S")
    reuse = tune_config.reuse_actors
    return RunPlan(
        storage_path=run_config.storage_path or DEFAULT_STORAGE,
        name=run_config.name or f"{name_of}_{timestamp}",
        sweep_name=sweep_name or secrets.token_hex(3)[:5],
        trainable=user,
        wrapped=trainable,
        space=space,
        num_samples=UNTIL_STOPPED if tune_config.num_samples == -1 else tune_config.num_samples,
        metric=tune_config.metric,
        mode=tune_config.mode,
        searcher=searcher,
        scheduler=scheduler,
        max_concurrent=bound,
        stop=stop,
        trial=TrialOptions(
            stop=stop.engine,
            checkpoint_every=every,
            resources=_resources(resources),
            max_failures=failure.max_failures,
            keep_checkpoints=keep,
            checkpoint_score=score,
            where="Tuner",
        ),
        fail_fast=failure.fail_fast,
        reuse_actors=True if reuse is None else bool(reuse),
        progress=run_config.verbose != 0,
        callbacks=list(run_config.callbacks or []),
        name_creator=tune_config.trial_name_creator,
        dirname_creator=tune_config.trial_dirname_creator,
        objectives=_objectives(search_alg),
    )
