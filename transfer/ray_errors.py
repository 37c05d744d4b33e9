"""The one table of Ray's exceptions that mean "the process (or its node) is gone".

Both the transfer tasks and the orchestrator's loop tell a lost worker (retry
elsewhere) from an error raised by user code (a ``RayTaskError``, which wraps the
original). Ray spreads that news over many exception types; this is the one place
that lists them.
"""

from __future__ import annotations

from ray import exceptions as rex

__all__ = ["LOST", "is_lost", "raised"]

LOST: tuple[type[BaseException], ...] = (
    rex.RayActorError,  # ActorDiedError and ActorUnavailableError are among its kinds
    rex.ActorDiedError,
    rex.ActorUnavailableError,
    rex.NodeDiedError,
    rex.ObjectLostError,  # OwnerDiedError, ObjectFetchTimedOutError...
    rex.OwnerDiedError,
    rex.ObjectFetchTimedOutError,
    rex.WorkerCrashedError,
    rex.LocalRayletDiedError,
    rex.TaskUnschedulableError,
    rex.ActorUnschedulableError,
)


def is_lost(err: BaseException) -> bool:
    """Whether ``err`` says the worker or node died (not that the code in it raised)."""
    return isinstance(err, LOST) and not isinstance(err, rex.RayTaskError)


def raised(err: BaseException) -> BaseException:
    """What the code in the worker raised, when ``err`` wraps it (a ``RayTaskError``);
    ``err`` itself otherwise."""
    if isinstance(err, rex.RayTaskError):
        return getattr(err, "cause", None) or err
    return err
