"""A trial's spec: one frozen, validated object, what the journal keeps of a trial.

``Orchestrator(...)`` builds an :class:`~orchestrator.core.settings.ExperimentSettings`;
``add_trial`` (and a sweep) builds a :class:`TrialSpec` from it and the trial's
:class:`~orchestrator.core.options.TrialOptions`, which override the experiment's
defaults; the journal stores a trial's spec with :meth:`TrialSpec.to_json` and a
resumed driver reads it back with :meth:`TrialSpec.from_json`; the state machine's
policy is derived from the spec and the settings (:func:`policy_for`). What changes
while a trial runs (its config after a PBT exploit, its state, checkpoints and
results) is not part of the spec: it lives in the trial's runtime record and in the
journal's changing part.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from orchestrator.core.checkpoints import RetentionPolicy, ScoreMode
from orchestrator.core.stopping import StopCondition
from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from orchestrator.core.judge import Judge
    from orchestrator.core.machine import HookProgressView, TrialPolicy
    from orchestrator.core.settings import ExperimentSettings


@dataclass(frozen=True)
class TrialSpec:
    """What a trial is and how it is run; it never changes once the trial exists.

    ``config`` is the trial's first config (an exploit gives the trial a new one, which
    its runtime record holds). ``json`` caches :meth:`to_json`: a spec read back from a
    journal keeps exactly what was written, code it did not load included.
    """

    trial_id: str
    trainable: type
    config: Mapping[str, Any]
    stop: StopCondition
    resources: Mapping[str, float]
    checkpoint_every: int = 0
    max_failures: int = 0
    keep_checkpoints: int | None = None
    checkpoint_score: tuple[str, ScoreMode] | None = None
    result_buffer: int | None = None  # None: adaptive
    json: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    #: Its id was given (``add_trial(trial_id=...)``, a sweep), not generated: a resumed
    #: experiment's calls adopt it by that id only (see :mod:`orchestrator.core.identity`).
    named: bool = field(default=False, compare=False)

    @property
    def retention(self) -> RetentionPolicy:
        return RetentionPolicy(self.keep_checkpoints, self.checkpoint_score)

    def to_json(self) -> dict[str, Any]:
        """The spec as journal fields (code pickled, the config as readable JSON too)."""
        if self.json is not None:
            return dict(self.json)
        from orchestrator.core.codec import class_path, pickle_b64
        from orchestrator.core.naming import trainable_identity

        path = class_path(self.trainable)
        return {
            "trainable": path,
            "trainable_name": trainable_identity(self.trainable),
            "trial_id_given": self.named,
            "trainable_pickle": None if path else pickle_b64(self.trainable),
            "config": dict(self.config),
            "config_pickle": pickle_b64(dict(self.config)),
            "stop_pickle": pickle_b64(self.stop),
            "checkpoint_every": self.checkpoint_every,
            "resources": dict(self.resources),
            "max_failures": self.max_failures,
            "keep_checkpoints": self.keep_checkpoints,
            "checkpoint_score": list(self.checkpoint_score) if self.checkpoint_score else None,
            "result_buffer": self.result_buffer,
            "saves_on_demand": bool(getattr(self.trainable, "saves_on_demand", True)),
        }

    def with_code(self) -> TrialSpec:
        """This spec, read back without its code (its trial was not going to run), with
        the code loaded now that the trial runs again (ConfigError when it cannot be).

        The trial's policy was built from the spec as read back, and stays: what it
        takes from a spec is the same either way (the stop criterion comes from the same
        pickle, which needs no more code than it did then, and ``saves_on_demand`` is
        journaled). A stop criterion that could not be read back then would be the one
        difference, so a trial that has one is refused rather than run without it."""
        if self.json is None:
            return self
        loaded = TrialSpec.from_json(self.trial_id, self.json, load_code=True)
        if isinstance(self.stop, _UnreadStop):
            raise ConfigError(
                f"trial {self.trial_id}: its stop criterion could not be read back when "
                "the experiment was resumed (its module could not be imported then), so "
                "it cannot run on without it; resume the experiment again from where "
                "that module imports"
            )
        return loaded

    @classmethod
    def from_json(cls, trial_id: str, data: Mapping[str, Any], *, load_code: bool) -> TrialSpec:
        """Rebuild a journaled spec. Without ``load_code`` nothing of the user's is
        imported or unpickled (for a trial that will not run: its module need not be
        importable here); the trainable is then a stand-in of the same name and the
        config the JSON one. A spec that cannot load its code raises ConfigError
        naming the trial, the module and the remedy."""
        score = data.get("checkpoint_score")
        common: dict[str, Any] = {
            "trial_id": trial_id,
            "resources": dict(data["resources"]),
            "checkpoint_every": int(data["checkpoint_every"]),
            "max_failures": int(data["max_failures"]),
            "keep_checkpoints": data.get("keep_checkpoints"),
            "checkpoint_score": (score[0], score[1]) if score else None,
            "result_buffer": _buffer(data.get("result_buffer", 1)),
            "json": dict(data),
            "named": bool(data.get("trial_id_given", False)),
        }
        if not load_code:
            return cls(
                trainable=_stand_in(data),
                config=dict(data.get("config") or {}),
                stop=_load_quietly(trial_id, data),
                **common,
            )
        from orchestrator.core.codec import import_class, unpickle_b64

        def load(what: Callable[[], Any]) -> Any:
            try:
                return what()
            except Exception as err:
                raise _unloadable(trial_id, data, err) from err

        path = data.get("trainable")
        trainable = load(
            (lambda: import_class(path)) if path else lambda: unpickle_b64(data["trainable_pickle"])
        )
        return cls(
            trainable=trainable,
            config=dict(load(lambda: unpickle_b64(data["config_pickle"]))),
            stop=load(lambda: unpickle_b64(data["stop_pickle"])),
            **common,
        )


def policy_for(
    spec: TrialSpec,
    settings: ExperimentSettings,
    judge: Judge | None = None,
    *,
    required_metrics: Mapping[str, str] | None = None,
    hook_progress: HookProgressView | None = None,
) -> TrialPolicy:
    """The state machine's policy for a trial, built once when the trial is added or
    adopted: its spec, the experiment's settings, the judges that decide after each
    result (its stop criterion, then ``judge``), the metrics its first result must
    report (its stop criterion's, then ``required_metrics``: what each is for; only
    with ``strict_metrics``), and how far its result hooks have got (the experiment's
    ``hook_progress``)."""
    from orchestrator.core.backoff import Backoff
    from orchestrator.core.judge import Judges, StopJudge
    from orchestrator.core.machine import TrialPolicy

    stop = StopJudge(spec.stop)
    required: dict[str, str] = {}
    if settings.strict_metrics:
        required = dict.fromkeys(spec.stop.metrics, "its stop criterion's metric")
        for name, use in (required_metrics or {}).items():
            required.setdefault(name, use)
    return TrialPolicy(
        checkpoint_every=spec.checkpoint_every,
        max_failures=spec.max_failures,
        retention=_shared(spec.retention),
        judge=stop if judge is None else Judges([stop, judge]),
        restart_backoff=_shared(Backoff(settings.failures.failure_backoff, RESTART_BACKOFF_CAP_S)),
        fallback_to_scratch=settings.failures.fallback_to_scratch,
        steps_per_call=spec.result_buffer or ADAPTIVE_MAX_STEPS,
        time_slice=ADAPTIVE_SLICE_S if spec.result_buffer is None else None,
        max_pending_saves=settings.buffering.max_pending_saves,
        required_metrics=required,
        saves_on_demand=bool(getattr(spec.trainable, "saves_on_demand", True)),
        hook_progress=hook_progress,
        stop_grace_s=settings.failures.stop_grace_s,
        save_grace_s=settings.storage.save_retry_for,
    )


#: Equal frozen values that many trials' policies hold (their retention, their back-off),
#: one object each: a sweep's ten thousand trials hold the same few (issue 36: ~190 bytes
#: a trial for the whole experiment). Bounded, like the required-metrics maps.
_SHARED: dict[Any, Any] = {}
_Value = TypeVar("_Value")


def _shared(value: _Value) -> _Value:
    try:
        kept = _SHARED.get(value)
    except TypeError:  # unhashable: a value of its own
        return value
    if kept is not None:
        return cast("_Value", kept)
    if len(_SHARED) < 256:
        _SHARED[value] = value
    return value


#: A failed trial restarts after ``failure_backoff * 2**(n-1)`` seconds, at most this.
RESTART_BACKOFF_CAP_S = 30.0
#: Adaptive result buffering (``result_buffer=None``, the default): one train call runs
#: steps back to back for about this long, at most ``ADAPTIVE_MAX_STEPS`` of them, and
#: never past a decision point (a checkpoint, the stop criterion, a scheduler's rung).
#: Short enough that a stop or pause waits for at most this much of a step batch; long
#: enough that trivial steps cost one call per dozens, not one each.
ADAPTIVE_SLICE_S = 0.02
ADAPTIVE_MAX_STEPS = 1000


def _buffer(value: Any) -> int | None:
    return None if value is None else int(value)


def _stand_in(data: Mapping[str, Any]) -> type:
    path = data.get("trainable") or ""
    name = path.rpartition(":")[2].rpartition(".")[2] or "Trainable"
    namespace = {
        "__doc__": f"{path or 'a pickled trainable'}, not loaded",
        "saves_on_demand": bool(data.get("saves_on_demand", True)),
    }
    return type(name, (), namespace)


class _UnreadStop(StopCondition):
    """A journaled stop criterion that could not be read back without the trial's code
    (its predicate's module is missing): never met. Only a trial that will not run has
    one (see :meth:`TrialSpec.with_code`)."""

    __slots__ = ()


def _load_quietly(trial_id: str, data: Mapping[str, Any]) -> StopCondition:
    from orchestrator.core.codec import unpickle_b64

    try:
        stop = unpickle_b64(data["stop_pickle"])
    except Exception:  # its predicate's module is missing: it will not run anyway
        return _UnreadStop(trial_id, None)
    return stop if isinstance(stop, StopCondition) else _UnreadStop(trial_id, None)


def _unloadable(trial_id: str, data: Mapping[str, Any], err: Exception) -> ConfigError:
    module = getattr(err, "name", None) if isinstance(err, ImportError) else None
    where = f"module {module!r}" if module else str(data.get("trainable") or "its pickled code")
    return ConfigError(
        f"trial {trial_id}: cannot load its code to resume it: {where} cannot be imported "
        f"here ({type(err).__name__}: {err}); run from the directory that holds it, or add "
        "that directory to PYTHONPATH"
    )
