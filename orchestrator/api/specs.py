"""A trial's trainable, config and options, checked and merged over the experiment's
settings into a :class:`~orchestrator.core.spec.TrialSpec`."""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Any, TypeVar, cast

from orchestrator.actor.function import function_name, is_function, wrap_function
from orchestrator.actor.trainable import is_trainable_class
from orchestrator.core.journal_format import RESERVED_NAMES
from orchestrator.core.options import TrialOptions
from orchestrator.core.settings import ExperimentSettings
from orchestrator.core.spec import TrialSpec
from orchestrator.core.validate import check_sendable
from orchestrator.errors import ConfigError

__all__ = ["build_trial_spec"]

T = TypeVar("T")


def build_trial_spec(
    settings: ExperimentSettings,
    trainable: Any,
    config: Mapping[str, Any] | None,
    options: TrialOptions,
    *,
    trial_id: str | None,
    index: int,
    token: str,
    taken: Container[str],
) -> TrialSpec:
    """A trial of ``trainable`` with ``config`` and ``options`` (checked when they were
    built) merged over ``settings``, as a spec.

    ``index`` is the trial's number in the experiment and ``token`` the session's, for
    a default id (``<trainable>_<token>_<index>``); ``taken`` holds the ids in use.
    Every mistake is a :class:`ConfigError` naming the trial and what to do.
    """
    function = is_function(trainable)
    if not function and not is_trainable_class(trainable):
        got = trainable.__name__ if isinstance(trainable, type) else repr(trainable)
        raise ConfigError(
            f"add_trial (trial #{index}): {got} is neither a subclass of "
            "orchestrator.Trainable nor a function; define `class MyTrainable(Trainable)` "
            "with setup/step/save_checkpoint/load_checkpoint, or `def train(config):` "
            "calling orchestrator.report(metrics)"
        )
    given = trial_id is not None
    if trial_id is None:
        named = function_name(trainable) if function else trainable.__name__
        trial_id = f"{named}_{token}_{index:05d}"
    if not isinstance(trial_id, str) or not trial_id or "/" in trial_id:
        raise ConfigError(f"trial_id must be a non-empty str without '/', got {trial_id!r}")
    if trial_id in RESERVED_NAMES:
        raise ConfigError(
            f"trial_id {trial_id!r} is the name of the experiment's journal in storage; "
            "choose another"
        )
    if trial_id in taken:
        raise ConfigError(f"trial {trial_id} already exists in experiment {settings.name!r}")
    if config is not None and not isinstance(config, Mapping):
        raise ConfigError(f"trial {trial_id}: config must be a dict, got {type(config).__name__}")
    if function and options.checkpoint_every:
        raise ConfigError(
            f"trial {trial_id}: checkpoint_every does not apply to a function trainable: "
            "it checkpoints when it calls report(metrics, checkpoint=directory)"
        )
    check_sendable(config or {}, trial_id)
    resources = options.resources
    if callable(resources):
        raise ConfigError(
            f"trial {trial_id}: resources must be a dict like {{'cpu': 0.5}}, got "
            f"{resources!r} (a function of the config is for a sweep's trials)"
        )
    return TrialSpec(
        trial_id=trial_id,
        trainable=wrap_function(trainable) if function else cast(type, trainable),
        config=dict(config or {}),
        stop=options.criterion.for_trial(trial_id),
        resources={"cpu": 1.0} if resources is None else dict(resources),
        checkpoint_every=options.checkpoint_every,
        max_failures=_or(options.max_failures, settings.failures.max_failures),
        keep_checkpoints=_or(options.keep_checkpoints, settings.retention.keep),
        checkpoint_score=_or(options.checkpoint_score, settings.retention.score),
        result_buffer=_or(options.result_buffer, settings.buffering.result_buffer),
        named=given,
    )


def _or(value: T | None, default: T) -> T:
    """A trial's option, or the experiment's setting when the trial leaves it None."""
    return default if value is None else value
