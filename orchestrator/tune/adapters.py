"""A Tune trainable as the engine runs it.

:func:`engine_trainable` turns what the user gave ``tune.Tuner`` (a function, a
``tune.Trainable`` subclass, either wrapped by ``with_parameters``/``with_resources``)
into what ``Orchestrator.sweep`` runs: a function (:class:`FunctionAdapter`, a callable
object, wrapped by the engine as a function trainable) or a class
(:class:`ClassAdapter`, an ``orchestrator.Trainable``). Both set the trial's Tune
context before the user's code runs and fetch ``with_parameters`` objects from Ray's
object store, where they were put once for the whole run.
"""

from __future__ import annotations

import inspect
import numbers
import os
import pickle
import types
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from orchestrator.actor.trainable import Trainable as EngineTrainable
from orchestrator.core.wire import REPORTED_CHECKPOINT
from orchestrator.tune import context as ctx
from orchestrator.tune import train_names
from orchestrator.tune.alias import aliased_marker
from orchestrator.tune.error import unsupported
from orchestrator.tune.result import DEFAULT_METRIC, SHOULD_CHECKPOINT
from orchestrator.tune.trainable import Trainable, building

__all__ = [
    "ClassAdapter",
    "FunctionAdapter",
    "engine_trainable",
    "trainable_name",
    "with_parameters",
    "with_resources",
]

if train_names.in_ray_worker():  # before a trainable is unpickled here (train_names)
    train_names.install()

#: Where a class trainable's dict checkpoint is pickled (Ray Tune's file name).
DICT_CHECKPOINT = "_dict_checkpoint.pkl"


def _fetch(params: Mapping[str, Any]) -> dict[str, Any]:
    """The ``with_parameters`` objects: ObjectRefs fetched (once each), values as given."""
    if not params:
        return {}
    import ray

    names = list(params)
    refs = [params[n] for n in names]
    values = ray.get(refs) if all(isinstance(r, ray.ObjectRef) for r in refs) else refs
    return dict(zip(names, values, strict=True))


def trainable_name(trainable: Any) -> str:
    while hasattr(trainable, "inner"):
        trainable = trainable.inner
    return str(getattr(trainable, "__name__", None) or type(trainable).__name__)


class FunctionAdapter:
    """A Tune training function as the engine's (a picklable callable object; pickled in
    a driver with ``ray.tune`` aliased, it installs the alias in the worker first)."""

    def __init__(
        self, function: Callable[..., Any], info: ctx.RunInfo, params: Mapping[str, Any]
    ) -> None:
        self.function = function
        self.info = info
        self.params = dict(params)
        self.__name__ = trainable_name(function)

    def __reduce__(self) -> tuple[Any, ...]:
        return _function_adapter, (aliased_marker(), self.function, self.info, self.params)

    def __call__(self, config: dict[str, Any]) -> Any:
        from orchestrator.actor.function import current_trial_id

        context = ctx.TrialContext(current_trial_id(), config, self.info)
        ctx.enter(context)
        train_names.install()
        ctx.to_trial_dir(context)
        output = self.function(config, **_fetch(self.params))
        if inspect.isgenerator(output):  # Tune's legacy API: each value yielded is reported
            for value in output:
                result = tune_output(value)
                if result is not None:
                    ctx.report(result)
            return None
        result = tune_output(output)
        return None if result is None else context.add_keys(result)


def _function_adapter(
    marker: None, function: Callable[..., Any], info: ctx.RunInfo, params: Mapping[str, Any]
) -> FunctionAdapter:
    """Unpickles a :class:`FunctionAdapter`; ``marker``, loaded first, did its work."""
    return FunctionAdapter(function, info, params)


def tune_output(value: Any) -> dict[str, Any] | None:
    """What Ray Tune makes of a function's return (or yield): a dict is a result, a
    number is ``{"_metric": number}``, a false value (None, 0, {}) is nothing."""
    if not value:
        return None
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, numbers.Number):
        return {DEFAULT_METRIC: value}
    raise ValueError(
        "Invalid return or yield value. Either return/yield a single number or a "
        "dictionary object in your trainable function."
    )


class ClassAdapter(EngineTrainable):
    """A ``tune.Trainable`` subclass as the engine's trainable (see the module docstring);
    :func:`engine_trainable` makes one subclass per run, naming the user's class."""

    tune_class: ClassVar[type[Trainable]]
    info: ClassVar[ctx.RunInfo]
    params: ClassVar[dict[str, Any]]

    def setup(self, config: dict[str, Any]) -> None:
        self._context = ctx.TrialContext(self.trial_id, config, self.info)
        ctx.enter(self._context)
        train_names.install()
        ctx.to_trial_dir(self._context)
        token = building.set((self, self._context, _fetch(self.params)))
        try:
            self.inner = self.tune_class(config)
        finally:
            building.reset(token)

    def step(self) -> dict[str, Any]:
        ctx.enter(self._context)
        result = self.inner.step()
        if not isinstance(result, Mapping):
            raise TypeError(
                f"trial {self.trial_id}: {type(self.inner).__name__}.step() must return a dict "
                f"of metrics, got {type(result).__name__}"
            )
        result = self._context.add_keys(dict(result))
        if result.pop(SHOULD_CHECKPOINT, False):
            result[REPORTED_CHECKPOINT] = True
        return result

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        saved = self.inner.save_checkpoint(checkpoint_dir)
        if isinstance(saved, Mapping):
            with open(os.path.join(checkpoint_dir, DICT_CHECKPOINT), "wb") as f:
                pickle.dump(dict(saved), f)
        elif saved is not None and os.path.abspath(str(saved)) != os.path.abspath(checkpoint_dir):
            raise TypeError(
                f"trial {self.trial_id}: {type(self.inner).__name__}.save_checkpoint() must "
                f"write into checkpoint_dir and return None or a dict, got {saved!r}"
            )

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        ctx.enter(self._context)
        pickled = os.path.join(checkpoint_dir, DICT_CHECKPOINT)
        if os.path.exists(pickled):
            with open(pickled, "rb") as f:
                self.inner.load_checkpoint(pickle.load(f))
        else:
            self.inner.load_checkpoint(checkpoint_dir)
        self._context.restarted()

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        taken = bool(self.inner.reset_config(new_config))
        if taken:
            self.inner.config = dict(new_config)
            self._context = ctx.TrialContext(self.trial_id, new_config, self.info)
        return taken

    def cleanup(self) -> None:
        inner = getattr(self, "inner", None)
        if inner is not None:
            inner.cleanup()


class Parametrized:
    """``tune.with_parameters(trainable, **objects)``: the objects go to Ray's object store
    once (when the run starts, or at once if Ray is up) and each trial fetches them.

    It is also callable, as Tune's is: a library may wrap it in a function of its own
    (Hugging Face's ``hyperparameter_search`` does, with ``functools.wraps``), which then
    calls it with the config in the worker. For that, once put, it pickles its
    ObjectRefs instead of the objects (they stay out of every trial's payload), and it
    has no ``__dict__``, so ``functools.wraps`` copies no object onto the wrapper."""

    __slots__ = ("_refs", "inner", "params")

    def __init__(self, inner: Any, params: Mapping[str, Any]) -> None:
        self.inner = inner
        self.params = dict(params)
        self._refs: tuple[str, dict[str, Any]] | None = None  # (Ray job, its ObjectRefs)

    @property
    def __name__(self) -> str:
        return trainable_name(self.inner)

    def __getstate__(self) -> dict[str, Any]:
        # References live as long as their Ray: a pickle for another one has the objects.
        return {"inner": self.inner, "params": self._current_refs() or self.params}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.inner, self.params, self._refs = state["inner"], state["params"], None

    def __call__(self, config: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        """Call the function with the objects (fetched once per call: in a trial)."""
        user, params, _ = unwrap(self, put=False)
        return user(config, *args, **kwargs, **_fetch(params))

    def _current_refs(self) -> dict[str, Any] | None:
        if self._refs is None:
            return None
        import ray

        if not ray.is_initialized() or ray.get_runtime_context().get_job_id() != self._refs[0]:
            return None
        return dict(self._refs[1])

    def put(self) -> dict[str, Any]:
        """The objects as ObjectRefs, put once per Ray session (Ray must be up)."""
        import ray

        job = ray.get_runtime_context().get_job_id()
        if self._refs is None or self._refs[0] != job:
            refs = {
                name: value if isinstance(value, ray.ObjectRef) else ray.put(value)
                for name, value in self.params.items()
            }
            self._refs = (job, refs)
        return dict(self._refs[1])


#: Where :func:`with_resources` puts a function's resources (Ray Tune's attribute).
RESOURCES = "_resources"


def _check_resources(resources: Any) -> None:
    if not (isinstance(resources, Mapping) or callable(resources)):
        raise unsupported(
            f"tune.with_resources(..., {type(resources).__name__})",
            "give a dict like {'cpu': 2, 'gpu': 1} or a function config -> such a dict",
        )


class WithResources:
    """A trainable and its trials' resources (a dict, or a function of the config):
    ``tune.with_resources`` of a class or of a ``with_parameters``, and
    ``tune.run(resources_per_trial=...)`` (which
    leaves the user's function as it is)."""

    def __init__(self, inner: Any, resources: Any) -> None:
        _check_resources(resources)
        self.inner = inner
        self.resources = resources
        self.__name__ = trainable_name(inner)


def unwrap(trainable: Any, *, put: bool = True) -> tuple[Any, dict[str, Any], Any]:
    """(the user's function or class, the with_parameters objects (as ObjectRefs with
    ``put``: Ray must be up), the with_resources resources or None: the outermost)."""
    params: dict[str, Any] = {}
    resources = None
    while True:
        if resources is None and not isinstance(trainable, type):
            resources = getattr(trainable, RESOURCES, None)
        if isinstance(trainable, Parametrized):
            params.update(trainable.put() if put else trainable.params)
        elif isinstance(trainable, WithResources):
            resources = trainable.resources if resources is None else resources
        else:
            if put:
                _put_wrapped(trainable)
            return trainable, params, resources
        trainable = trainable.inner


def _put_wrapped(function: Any) -> None:
    """Put the objects of a ``with_parameters`` that a function of the user's wraps
    (``functools.wraps`` sets ``__wrapped__``), so that its pickle carries references."""
    inner = getattr(function, "__wrapped__", None)
    for _ in range(8):  # a chain of wrappers, never a cycle
        if inner is None:
            return
        if isinstance(inner, Parametrized):
            inner.put()
        inner = getattr(inner, "__wrapped__", None) or getattr(inner, "inner", None)


def check_trainable(trainable: Any) -> None:
    """Refuse what cannot be a Tune trainable, at once."""
    if isinstance(trainable, type) and issubclass(trainable, Trainable):
        return
    if isinstance(trainable, type):
        raise unsupported(
            f"the trainable {trainable.__name__} (not a subclass of tune.Trainable)",
            "subclass orchestrator.tune.Trainable (from orchestrator import tune), or pass a "
            "training function",
        )
    if isinstance(trainable, str):
        raise unsupported(
            f"a trainable by name ({trainable!r}: Tune's registry)",
            "pass the function or class itself",
        )
    if _is_train_trainer(trainable):
        raise unsupported(
            f"tune.Tuner({type(trainable).__name__}(...)) (a Ray Train trainer as the "
            "trainable, deprecated by Ray)",
            "build and fit the trainer in a function, with "
            "run_config=ray.train.RunConfig(callbacks=[TuneReportCallback()]) (from "
            "ray.tune.integration.ray_train), and tune.Tuner(tune.with_resources(that "
            "function, {'cpu': 0}), param_space={...}) (README: 'Distributed trials')",
        )
    if not callable(trainable):
        raise unsupported(f"the trainable {trainable!r}", "pass a function or a tune.Trainable")


def _is_train_trainer(trainable: Any) -> bool:
    """A Ray Train trainer object (``TorchTrainer(...)``...), told without importing Ray
    Train: one of its classes lives in ``ray.train`` and it has ``fit``."""
    return hasattr(trainable, "fit") and any(
        (cls.__module__ or "").startswith("ray.train.") for cls in type(trainable).__mro__
    )


def engine_trainable(trainable: Any, info: ctx.RunInfo, params: Mapping[str, Any]) -> Any:
    """What ``Orchestrator.sweep`` runs for the user's ``trainable``."""
    check_trainable(trainable)
    if isinstance(trainable, type) and issubclass(trainable, Trainable):
        namespace = {
            "_trialflow_alias": aliased_marker(),  # first: loaded before the user's class
            "tune_class": trainable,
            "info": info,
            "params": dict(params),
            "__module__": trainable.__module__,
            "__qualname__": f"engine_trainable.<locals>.{trainable.__name__}",
        }
        return type(trainable.__name__, (ClassAdapter,), namespace)
    return FunctionAdapter(trainable, info, params)


def with_parameters(trainable: Any, **kwargs: Any) -> Parametrized:
    """Ray Tune's ``with_parameters``: ``trainable`` receives ``kwargs`` (a function as
    keyword arguments after ``config``, a class in ``setup(config, **kwargs)``); each
    object goes to Ray's object store once, not into every trial's pickle."""
    if isinstance(trainable, type) and not issubclass(trainable, Trainable):
        raise unsupported(
            f"with_parameters({trainable.__name__}, ...)", "pass a function or a tune.Trainable"
        )
    return Parametrized(trainable, kwargs)


def with_resources(trainable: Any, resources: Any) -> Any:
    """Ray Tune's ``with_resources``: every trial of ``trainable`` asks for ``resources``
    (a dict such as ``{"cpu": 2, "gpu": 1}``, or a function of the config returning one).

    As on Tune, a function comes back as itself with the resources as its ``_resources``
    attribute (a bound method as a plain function wrapping it), so what takes a function
    still does (``ray.remote(tune.with_resources(f, ...))``); a class comes back wrapped.
    """
    if isinstance(trainable, (type, Parametrized)):
        # A class, or a with_parameters (slotted: it carries no attribute), is wrapped.
        return WithResources(trainable, resources)
    _check_resources(resources)
    if isinstance(trainable, types.MethodType):
        method = trainable

        def trainable(config: dict[str, Any], **params: Any) -> Any:
            return method(config, **params)

        trainable.__name__ = method.__name__
    try:
        setattr(trainable, RESOURCES, resources)
    except AttributeError:
        raise unsupported(
            f"tune.with_resources({type(trainable).__name__} object, ...) (it takes no attributes)",
            "wrap it in a plain function: def f(config): return obj(config)",
        ) from None
    return trainable
