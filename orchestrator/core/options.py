"""How a trial is run, as one frozen value: :class:`TrialOptions`.

``add_trial(...)`` and ``sweep(...)`` take these options as keyword arguments (their
shorthand) and build one value of them at the call, checked there, once; everything
below the API (the spec's builder, a sweep's plan, driver and capacity bound) passes the
value on, never the loose arguments. Ray Tune groups the same options per trial in
``RunConfig(stop=...)``, ``CheckpointConfig(checkpoint_frequency, num_to_keep,
checkpoint_score_attribute)`` and ``FailureConfig(max_failures)``; here they keep the
names of the keywords a user already writes, so the value and the shorthand read alike.

``None`` in ``max_failures``, ``keep_checkpoints``, ``checkpoint_score`` and
``result_buffer`` means the experiment's setting (``Orchestrator(...)``'s); the trial's
spec (:class:`~orchestrator.core.spec.TrialSpec`) holds the merged values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeAlias

from orchestrator.core.checkpoints import RetentionPolicy, ScoreMode
from orchestrator.core.stopping import StopCondition, StopSpec
from orchestrator.core.validate import check_failures, check_int, check_resources
from orchestrator.errors import ConfigError

__all__ = ["ResourcesSpec", "TrialOptions"]

#: A trial's resources (``{"cpu": 0.5, "gpu": 1}``; ``None``: one CPU), or, for a sweep's
#: trials, a function of a trial's config returning them (Ray Tune's
#: ``with_resources(trainable, fn)``).
ResourcesSpec: TypeAlias = (
    Mapping[str, float] | Callable[[dict[str, Any]], Mapping[str, float]] | None
)


@dataclass(frozen=True)
class TrialOptions:
    """A trial's options (see ``Orchestrator.add_trial`` for what each does), checked
    when built: a mistake is a :class:`~orchestrator.errors.ConfigError` that names
    ``where`` (the call that gave it: ``"add_trial"``, ``"trial <id>"``, ``"sweep
    'name'"``). A dict of resources is kept as checked (names to floats)."""

    stop: StopSpec = None
    checkpoint_every: int = 0
    resources: ResourcesSpec = None
    max_failures: int | None = None
    keep_checkpoints: int | None = None
    checkpoint_score: tuple[str, ScoreMode] | None = None
    result_buffer: int | None = None
    where: str = field(default="TrialOptions", kw_only=True, repr=False, compare=False)
    #: ``stop`` as a checked criterion (its trial id is given per trial: ``for_trial``).
    criterion: StopCondition = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where, every = self.where, self.checkpoint_every
        if isinstance(every, bool) or not isinstance(every, int):
            raise ConfigError(f"{where}: checkpoint_every must be an int >= 0, got {every!r}")
        if every < 0:
            raise ConfigError(
                f"{where}: checkpoint_every must be >= 0 (0 disables checkpoints), got {every}"
            )
        if self.max_failures is not None:
            check_failures(self.max_failures, where)
        if self.result_buffer is not None:
            check_int(self.result_buffer, "result_buffer", where)
        RetentionPolicy(self.keep_checkpoints, self.checkpoint_score)  # checks both
        if self.resources is not None and not callable(self.resources):
            object.__setattr__(self, "resources", check_resources(self.resources, where))
        object.__setattr__(self, "criterion", StopCondition("", self.stop, where=where))

    def for_config(self, config: Mapping[str, Any]) -> TrialOptions:
        """The options of a sweep's trial with ``config``: resources given as a function
        of the config are called here (and their answer checked); otherwise these."""
        if not callable(self.resources):
            return self
        try:
            shape = self.resources(dict(config))
        except Exception as err:
            raise ConfigError(
                f"the sweep's resources function raised {type(err).__name__}: {err} (for "
                f"config {dict(config)!r})"
            ) from err
        return replace(self, resources=shape)

    def keywords(self) -> dict[str, Any]:
        """The options as the keyword arguments that build them (a sweep's journaled
        call holds them so, and a resumed driver makes the same call)."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if f.init and f.kw_only is False
        }


def call_options(where: str, options: TrialOptions | None, **keywords: Any) -> TrialOptions:
    """The options of an ``add_trial`` or ``sweep`` call: ``options=TrialOptions(...)``,
    or the keywords, its shorthand, built here into one (``where`` names the call).
    Both at once is a ConfigError naming the keywords given besides ``options``."""
    shorthand = TrialOptions(**keywords, where=where)
    if options is None:
        return shorthand
    if not isinstance(options, TrialOptions):
        raise ConfigError(
            f"{where}: options must be an orchestrator.TrialOptions, got {type(options).__name__}"
        )
    unset = TrialOptions()
    extra = [k for k in keywords if getattr(shorthand, k) != getattr(unset, k)]
    if extra:
        raise ConfigError(
            f"{where}: give the trial's options either as options=TrialOptions(...) or as "
            f"keywords, not both (got {', '.join(extra)} besides options)"
        )
    return options
