"""The orchestrator's own error types.

One shallow hierarchy rooted at :class:`OrchestratorError`, so callers can catch the
whole family or one precise kind. Messages name the trial and say what to do.
"""

from __future__ import annotations

import types
from typing import TypeVar


class OrchestratorError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigError(OrchestratorError, ValueError):
    """Bad input to the public API (a wrong argument, a class that is not a Trainable...)."""


class InvalidTransition(OrchestratorError):
    """An event that the trial's state machine does not accept in its current state.

    This is a bug in the orchestrator (or in code driving the machine by hand), never a
    user error: the machine is left unchanged.
    """


class TrialError(OrchestratorError):
    """A trial failed: its trainable raised, or its actor or node died.

    ``trial_id`` names the trial; ``__cause__`` (and :attr:`cause`) hold the original
    exception when there is one.
    """

    def __init__(self, trial_id: str, message: str, cause: BaseException | None = None):
        # Messages of errors raised for this trial (by our actor code, or a TrialError
        # wrapped again) already name it: the prefix is said once, in front.
        message = message.replace(f"trial {trial_id}: ", "")
        super().__init__(f"trial {trial_id}: {message}")
        self.trial_id = trial_id
        self.cause = cause


class NoCheckpointError(OrchestratorError, LookupError):
    """A restore was asked for, but the trial has no persisted checkpoint to restore."""


class TrialNotRunning(OrchestratorError):
    """An operation needs a live orchestrator loop (inside ``run()``), and there is none."""


class JournalError(OrchestratorError):
    """The experiment's journal in storage cannot be read back (``resume=True``)."""


class JournalDamaged(JournalError):
    """The experiment's journal in storage is damaged: an object truncated, not JSON,
    or missing fields. ``where`` names the object, ``what`` says what is wrong with it,
    ``uri`` is the experiment's; the message says how to recover
    (``python -m orchestrator repair``)."""

    def __init__(self, message: str, *, uri: str, where: str, what: str) -> None:
        super().__init__(message)
        self.uri = uri
        self.where = where
        self.what = what


class CheckpointNotVisible(OrchestratorError):
    """A checkpoint in local storage is visible from no live node: its files are gone,
    or only a dead node's disk holds them."""


class BlobCollected(OrchestratorError):
    """A save reused a blob of an earlier checkpoint that checkpoint garbage collection
    deleted while the save ran (see ``engine/blob_refs.py``). Storage is fine: only this
    save is dropped; the trial's older checkpoints stay, and it trains on (its next save
    stores the blob again)."""


class ExperimentExists(ConfigError):
    """An experiment of that name is already in storage, and neither ``resume=True`` nor
    ``overwrite=True`` was given: it is never replaced silently."""


class ExperimentNotFound(ConfigError):
    """``resume=True`` for an experiment that storage does not hold."""


class ExperimentLocked(OrchestratorError):
    """Another driver runs the experiment (it holds the experiment's lease): one
    experiment has one driver. The message names that driver (host, pid, user, since
    when) and how to take over a lease it left behind; ``holder`` is its
    :class:`~orchestrator.core.lease_record.Holder` (None when unknown)."""

    def __init__(self, message: str, holder: object = None) -> None:
        super().__init__(message)
        self.holder = holder


class LeaseLost(OrchestratorError):
    """This driver lost its experiment's lease (another driver took it over, or it was
    deleted): it wrote nothing more to the journal or the logs, and ``run()`` ends with
    this error rather than mix its trials' results with the other driver's."""


class TrainableUnavailable(OrchestratorError):
    """A trial's worker process cannot load its trainable (its module is not installed
    where the worker runs). Retrying cannot help: the trial goes to ERROR at once."""


class TrainableExited(OrchestratorError):
    """A trainable's code called ``sys.exit()`` (raised ``SystemExit``) inside a trial.

    Ray would end the worker process for it, and the trial would only read "the actor
    died unexpectedly"; the actor turns it into this error instead, a failure of the
    trial like any exception, naming the call and the exit code."""


class NotInTrial(OrchestratorError):
    """``report()`` or ``get_checkpoint()`` was called outside a function trainable's
    run (not from the function ``add_trial`` was given, nor from code it calls)."""


# -- an error that is also its cause's kind ------------------------------------------------

_E = TypeVar("_E", bound=BaseException)
_LIKE: dict[tuple[type[BaseException], type[BaseException]], type[BaseException]] = {}


def like_cause(base: type[_E], message: str, cause: BaseException) -> _E:
    """An error of ``base`` saying ``message`` that is *also* an instance of ``cause``'s
    class, so ``except ValueError`` (or ``isinstance``) still finds the user's error
    once it is reported as a trial's failure; ``__cause__`` is ``cause``, and the
    cause's attributes are readable on it. Ray's task errors behave this way. When no
    such class can be made (a class that forbids subclassing), a plain ``base``.

    The class made (named ``Base(Cause)``) is cached per pair; instances pickle as the
    pair of classes (by reference) and the message."""
    kind = type(cause)
    made: BaseException
    if isinstance(cause, base) or not issubclass(kind, Exception) or kind is Exception:
        made = base(message)
    else:
        try:
            made = _like_class(base, kind).__new__(_like_class(base, kind), message)
            BaseException.__init__(made, message)
            made.__dict__.update(getattr(cause, "__dict__", {}))
            _copy_builtin_fields(made, cause)
        except TypeError:
            made = base(message)
    made.__cause__ = cause
    return made  # type: ignore[return-value]


#: BaseException's own fields: the made error's are its own, not the cause's.
_OWN_FIELDS = frozenset(
    {"args", "__traceback__", "__context__", "__cause__", "__suppress_context__"}
)


def _copy_builtin_fields(made: BaseException, cause: BaseException) -> None:
    """The cause's fields that built-in exceptions keep in slots (``OSError.errno``,
    ``SystemExit.code``, ``ImportError.name``...), which ``__dict__`` does not hold."""
    for klass in type(cause).__mro__:
        if klass.__module__ != "builtins":
            continue
        for name, field in vars(klass).items():
            if name in _OWN_FIELDS or not isinstance(
                field, (types.MemberDescriptorType, types.GetSetDescriptorType)
            ):
                continue
            try:
                setattr(made, name, getattr(cause, name))
            except (AttributeError, TypeError, ValueError):
                pass


def _like_class(base: type[BaseException], kind: type[BaseException]) -> type[BaseException]:
    cls = _LIKE.get((base, kind))
    if cls is None:
        namespace = {
            "__init__": _like_init,
            "__str__": _like_str,
            "__getattr__": _like_getattr,
            "__reduce__": _like_reduce,
            "__module__": base.__module__,
        }
        cls = type(f"{base.__name__}({kind.__name__})", (base, kind), namespace)
        _LIKE[(base, kind)] = cls
    return cls


def _like_init(self: BaseException, message: str) -> None:
    BaseException.__init__(self, message)


def _like_str(self: BaseException) -> str:
    return str(self.args[0]) if self.args else ""


def _like_getattr(self: BaseException, name: str) -> object:
    cause = BaseException.__getattribute__(self, "__cause__")
    if cause is None or name.startswith("__"):
        raise AttributeError(name)
    return getattr(cause, name)


def _like_reduce(self: BaseException) -> tuple[object, ...]:
    bases = type(self).__bases__
    return (_rebuild_like, (bases[0], bases[1], _like_str(self), self.__cause__))


def _rebuild_like(
    base: type[BaseException], kind: type[BaseException], message: str, cause: BaseException | None
) -> BaseException:
    if cause is None or type(cause) is not kind:
        return base(message)
    return like_cause(base, message, cause)
