"""The settings of an experiment and of a trial: one frozen, validated object each.

Every knob is named once here. ``Orchestrator(...)`` builds an
:class:`ExperimentSettings`; ``add_trial`` (and a sweep) builds a :class:`TrialSpec`
from it, its arguments overriding the experiment's defaults; the journal stores a
trial's spec with :meth:`TrialSpec.to_json` and a resumed driver reads it back with
:meth:`TrialSpec.from_json`; the state machine's policy is derived from both
(:func:`policy_for`). What changes while a trial runs (its config after a PBT exploit,
its state, checkpoints and results) is not part of the spec: it lives in the trial's
runtime record and in the journal's changing part.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

from .checkpoints import RetentionPolicy, ScoreMode
from .errors import ConfigError
from .stopping import StopCondition, StopSpec

if TYPE_CHECKING:
    from .judge import Judge
    from .lifecycle import TrialPolicy


class StorageMode(enum.Enum):
    """Where checkpoints live, which decides how they are saved, found and deleted."""

    #: A local path the nodes may not share: a checkpoint is wherever a disk holds it,
    #: found by looking (:mod:`orchestrator.locality`); actors commit small ones.
    LOCAL = "local"
    #: A local path every node sees (NFS, ``storage_shared=True``): no looking.
    SHARED = "shared"
    #: S3 or GCS: uploaded by each node's persister, downloaded by restoring actors.
    REMOTE = "remote"

    @property
    def is_local(self) -> bool:
        return self is not StorageMode.REMOTE


@dataclass(frozen=True)
class ExperimentSettings:
    """``Orchestrator``'s knobs (see its docstring for what each does), validated."""

    name: str = "exp"
    max_failures: int = 0
    keep_checkpoints: int | None = None
    checkpoint_score: tuple[str, ScoreMode] | None = None
    result_buffer: int | None = None  # None: adaptive (see ADAPTIVE_SLICE_S)
    trials_per_worker: int = 1
    spare_actors: int = 1
    failure_backoff: float = 0.2
    fallback_to_scratch: bool = False
    save_retry_for: float = 300.0
    max_pending_saves: int = 2
    storage_shared: bool = False
    strict_metrics: bool = True
    resume: bool = False
    resume_errored: bool = False
    overwrite: bool = False
    journal_interval: float = 1.0
    hook_slow_after: float = 10.0
    stop_grace_s: float = 30.0

    def __post_init__(self) -> None:
        name = self.name
        if (
            not isinstance(name, str)
            or not name.strip()
            or name != name.strip()
            or "/" in name
            or name in (".", "..")
            or not name.isprintable()
        ):
            raise ConfigError(
                "experiment name must be a non-empty str without '/', control characters, "
                f"or spaces at either end (it names a directory or prefix), got {name!r}"
            )
        check_failures(self.max_failures, "Orchestrator")
        if self.result_buffer is not None:
            check_int(self.result_buffer, "result_buffer", "Orchestrator")
        check_int(self.trials_per_worker, "trials_per_worker", "Orchestrator")
        check_int(self.spare_actors, "spare_actors", "Orchestrator", least=0)
        check_int(self.max_pending_saves, "max_pending_saves", "Orchestrator", least=0)
        for what in (
            "failure_backoff",
            "save_retry_for",
            "journal_interval",
            "hook_slow_after",
            "stop_grace_s",
        ):
            check_seconds(getattr(self, what), what, "Orchestrator")
        if self.resume and self.overwrite:
            raise ConfigError(
                f"experiment {name!r}: resume=True continues the experiment and "
                "overwrite=True deletes it; pass one of them"
            )
        self.retention  # validates keep_checkpoints and checkpoint_score  # noqa: B018

    @property
    def retention(self) -> RetentionPolicy:
        return RetentionPolicy(self.keep_checkpoints, self.checkpoint_score)

    def storage_mode(self, is_local: bool) -> StorageMode:
        if not is_local:
            return StorageMode.REMOTE
        return StorageMode.SHARED if self.storage_shared else StorageMode.LOCAL


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
    #: experiment's calls adopt it by that id only (see :mod:`orchestrator.identity`).
    named: bool = field(default=False, compare=False)

    @property
    def retention(self) -> RetentionPolicy:
        return RetentionPolicy(self.keep_checkpoints, self.checkpoint_score)

    def with_config(self, config: Mapping[str, Any]) -> TrialSpec:
        return replace(self, config=dict(config), json=None)

    def to_json(self) -> dict[str, Any]:
        """The spec as journal fields (code pickled, the config as readable JSON too)."""
        if self.json is not None:
            return dict(self.json)
        from .identity import trainable_identity
        from .journal import class_path, pickle_b64

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
        from .journal import import_class, unpickle_b64

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
    from .function import function_name, is_function, wrap_function
    from .journal import RESERVED_NAMES
    from .trainable import is_trainable_class

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


def policy_for(
    spec: TrialSpec, settings: ExperimentSettings, judge: Judge | None = None
) -> TrialPolicy:
    """The state machine's policy for a trial: its spec, the experiment's settings, and
    the judges that decide after each result (its stop criterion, then ``judge``)."""
    from .backoff import Backoff
    from .judge import Judges, StopJudge
    from .lifecycle import TrialPolicy

    stop = StopJudge(spec.stop)
    return TrialPolicy(
        checkpoint_every=spec.checkpoint_every,
        max_failures=spec.max_failures,
        retention=spec.retention,
        judge=stop if judge is None else Judges([stop, judge]),
        restart_backoff=Backoff(settings.failure_backoff, RESTART_BACKOFF_CAP_S),
        fallback_to_scratch=settings.fallback_to_scratch,
        steps_per_call=spec.result_buffer or ADAPTIVE_MAX_STEPS,
        time_slice=ADAPTIVE_SLICE_S if spec.result_buffer is None else None,
        max_pending_saves=settings.max_pending_saves,
        required_metrics=(
            dict.fromkeys(spec.stop.metrics, "its stop criterion's metric")
            if settings.strict_metrics
            else {}
        ),
        saves_on_demand=bool(getattr(spec.trainable, "saves_on_demand", True)),
        stop_grace_s=settings.stop_grace_s,
        save_grace_s=settings.save_retry_for,
    )


def policy_for_loaded(policy: TrialPolicy, spec: TrialSpec) -> None:
    """Point ``policy``'s stop judge at ``spec``'s stop criterion, once a trial resumed
    without its code has loaded it."""
    from .judge import Judges, StopJudge

    judges = policy.judge.judges if isinstance(policy.judge, Judges) else (policy.judge,)
    for judge in judges:
        if isinstance(judge, StopJudge):
            judge.stop = spec.stop
    policy.saves_on_demand = bool(getattr(spec.trainable, "saves_on_demand", True))


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
    from .trainable import Trainable

    path = data.get("trainable") or ""
    name = path.rpartition(":")[2].rpartition(".")[2] or "Trainable"
    namespace = {
        "__doc__": f"{path or 'a pickled trainable'}, not loaded",
        "saves_on_demand": bool(data.get("saves_on_demand", True)),
    }
    return type(name, (Trainable,), namespace)


def _load_quietly(trial_id: str, data: Mapping[str, Any]) -> StopCondition:
    from .journal import unpickle_b64

    try:
        stop = unpickle_b64(data["stop_pickle"])
    except Exception:  # its predicate's module is missing: it will not run anyway
        return StopCondition(trial_id, None)
    return stop if isinstance(stop, StopCondition) else StopCondition(trial_id, None)


def _unloadable(trial_id: str, data: Mapping[str, Any], err: Exception) -> ConfigError:
    module = getattr(err, "name", None) if isinstance(err, ImportError) else None
    where = f"module {module!r}" if module else str(data.get("trainable") or "its pickled code")
    return ConfigError(
        f"trial {trial_id}: cannot load its code to resume it: {where} cannot be imported "
        f"here ({type(err).__name__}: {err}); run from the directory that holds it, or add "
        "that directory to PYTHONPATH"
    )


# -- validation, shared by the public API ------------------------------------------------


def check_failures(value: Any, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise ConfigError(
            f"{where}: max_failures must be an int >= -1 (-1: no limit), got {value!r}"
        )


def check_int(value: Any, what: str, where: str, least: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{where}: {what} must be an int >= {least}, got {value!r}")


def check_seconds(value: Any, what: str, where: str) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{where}: {what} must be a number of seconds >= 0, got {value!r}")


def check_resources(resources: Mapping[str, float] | None, trial_id: str) -> dict[str, float]:
    if resources is None:
        return {"cpu": 1.0}
    if not isinstance(resources, Mapping):
        raise ConfigError(
            f"trial {trial_id}: resources must be a dict like {{'cpu': 0.5}}, got {resources!r}"
        )
    checked: dict[str, float] = {}
    for key, amount in resources.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"trial {trial_id}: resource names must be str, got {key!r}")
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            raise ConfigError(
                f"trial {trial_id}: resource {key!r} must be a number >= 0, got {amount!r}"
            )
        checked[key] = float(amount)
    return checked


def check_sendable(config: Mapping[str, Any], trial_id: str) -> None:
    """The config goes to a worker process (pickled): name the key that cannot."""
    import cloudpickle

    try:
        cloudpickle.dumps(config)
        return
    except Exception as err:
        path, cause = _unpicklable(config, ()) or ((), err)
    where = ".".join(path) or "(the whole config)"
    raise ConfigError(
        f"trial {trial_id}: config key {where!r} cannot be sent to a worker process "
        f"({type(cause).__name__}: {cause}); put only picklable values in the config and "
        "create locks, clients or open files in the trainable's setup()"
    ) from cause


def _unpicklable(value: Any, path: tuple[str, ...]) -> tuple[tuple[str, ...], Exception] | None:
    import cloudpickle

    if isinstance(value, Mapping):
        for key, item in value.items():
            found = _unpicklable(item, (*path, str(key)))
            if found is not None:
                return found
        return None
    try:
        cloudpickle.dumps(value)
    except Exception as err:
        return path, err
    return None
