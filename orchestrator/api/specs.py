"""``add_trial``'s arguments, checked and merged over the experiment's settings into a
:class:`~orchestrator.core.spec.TrialSpec`."""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Any, cast

from orchestrator.actor.function import function_name, is_function, wrap_function
from orchestrator.actor.trainable import is_trainable_class
from orchestrator.core.checkpoints import RetentionPolicy, ScoreMode
from orchestrator.core.journal_format import RESERVED_NAMES
from orchestrator.core.spec import ExperimentSettings, TrialSpec
from orchestrator.core.stopping import StopCondition, StopSpec
from orchestrator.core.validate import (
    check_failures,
    check_int,
    check_resources,
    check_sendable,
)
from orchestrator.errors import ConfigError

__all__ = ["build_trial_spec"]


def build_trial_spec(
    settings: ExperimentSettings,
    trainable: Any,
    config: Mapping[str, Any] | None = None,
    stop: StopSpec = None,
    checkpoint_every: int = 0,
    resources: Mapping[str, float] | None = None,
    *,
    trial_id: str | None,
    index: int,
    token: str,
    taken: Container[str],
    max_failures: int | None = None,
    keep_checkpoints: int | None = None,
    checkpoint_score: tuple[str, ScoreMode] | None = None,
    result_buffer: int | None = None,
) -> TrialSpec:
    """``add_trial``'s arguments checked and merged over ``settings`` into a spec.

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
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int):
        raise ConfigError(
            f"trial {trial_id}: checkpoint_every must be an int >= 0, got {checkpoint_every!r}"
        )
    if checkpoint_every < 0:
        raise ConfigError(
            f"trial {trial_id}: checkpoint_every must be >= 0 (0 disables checkpoints), "
            f"got {checkpoint_every}"
        )
    if function and checkpoint_every:
        raise ConfigError(
            f"trial {trial_id}: checkpoint_every does not apply to a function trainable: "
            "it checkpoints when it calls report(metrics, checkpoint=directory)"
        )
    check_sendable(config or {}, trial_id)
    failures = settings.max_failures if max_failures is None else max_failures
    check_failures(failures, f"trial {trial_id}")
    buffer = settings.result_buffer if result_buffer is None else result_buffer
    if buffer is not None:
        check_int(buffer, "result_buffer", f"trial {trial_id}")
    keep = settings.keep_checkpoints if keep_checkpoints is None else keep_checkpoints
    score = settings.checkpoint_score if checkpoint_score is None else checkpoint_score
    RetentionPolicy(keep, score)  # validates both
    return TrialSpec(
        trial_id=trial_id,
        trainable=wrap_function(trainable) if function else cast(type, trainable),
        config=dict(config or {}),
        stop=StopCondition(trial_id, stop),
        resources=check_resources(resources, trial_id),
        checkpoint_every=checkpoint_every,
        max_failures=failures,
        keep_checkpoints=keep,
        checkpoint_score=score,
        result_buffer=buffer,
        named=given,
    )
