"""What a finished piece of actor work means: completions become events.

Every call the executor makes is a :class:`Pending` in the loop's in-flight table, with
a typed payload for its kind. When its ref resolves, :meth:`Outcomes.read` turns the
value (or the exception) into at most one event for the trial's state machine, plus the
*follow-ups* the completion asks for (upload a checkpoint that was too big to commit in
place, stream one its actor does not see, kill an actor that finished its cleanup...).
It decides only; the executor does the I/O. Ray's exceptions are told apart in one
place: :func:`transfer.ray_errors.is_lost` (the process or node is gone) against an
error raised by the user's code.
"""

from __future__ import annotations

import enum
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.actor.io import is_permanent
from orchestrator.core.checkpoints import Checkpoint
from orchestrator.core.events import (
    ActorReady,
    CheckpointUnavailable,
    ConfigRefused,
    Event,
    Failure,
    RestoreDone,
    SaveDone,
    SaveFailed,
    TrainResult,
)
from orchestrator.core.wire import CONFIG_REFUSED, NOT_VISIBLE
from orchestrator.engine.blob_refs import BlobRefs
from orchestrator.errors import BlobCollected, TrainableExited, TrainableUnavailable, TrialError
from storage import StorageError
from transfer.ray_errors import is_lost, raised

if TYPE_CHECKING:
    from orchestrator.engine.trial_runtime import TrialRuntime

log = logging.getLogger("orchestrator.engine.loop")


class CallKind(enum.Enum):
    """Which remote call a pending outcome answers (its value names the call in logs)."""

    READY = "setup"
    TRAIN = "train"
    SAVE = "save"
    RESTORE = "restore"
    FETCH = "fetch"  # streaming a checkpoint to the restoring actor's node
    STOP = "stop"


@dataclass(frozen=True)
class SavePayload:
    iteration: int
    key: str
    metrics: dict[str, Any]
    node_id: str
    host: str | None


@dataclass(frozen=True)
class RestorePayload:
    checkpoint: Checkpoint


@dataclass(frozen=True)
class FetchPayload:
    checkpoint: Checkpoint
    staged: str


@dataclass(frozen=True)
class StopPayload:
    actor: Any = None  # kill it once stopped: it hosted no other trial
    host: Any = None  # its host, kept (for reuse or other trials) unless unclean


Payload = SavePayload | RestorePayload | FetchPayload | StopPayload | None


@dataclass(eq=False)
class Pending:
    """One entry of the in-flight table."""

    runtime: TrialRuntime
    kind: CallKind
    generation: int
    payload: Payload = None


# -- follow-ups: I/O a completion asks for ---------------------------------------------


@dataclass(frozen=True)
class Upload:
    """Hand a checkpoint saved to scratch to its node's persister."""

    save: Pending
    local_dir: str


@dataclass(frozen=True)
class Stream:
    """Stream a checkpoint to the trial's node from a live node that sees it."""

    checkpoint: Checkpoint


@dataclass(frozen=True)
class LoadStreamed:
    """Load the checkpoint streamed to ``staged`` on the trial's node."""

    checkpoint: Checkpoint
    staged: str


@dataclass(frozen=True)
class Kill:
    actor: Any


@dataclass(frozen=True)
class Collect:
    """Garbage-collect a checkpoint committed after its actor was given up."""

    checkpoint: Checkpoint


@dataclass(frozen=True)
class CheckBlobs:
    """A committed save names blobs deleted while it ran: check them before it counts
    (see :mod:`orchestrator.engine.blob_refs`)."""

    save: Pending
    manifest: Any
    suspects: frozenset[str]


@dataclass(frozen=True)
class Unclean:
    """A kept actor's process must not host another trial: retire it."""

    host: Any


@dataclass(frozen=True)
class HostDied:
    """The trial's process died: no trial may join it any more."""

    runtime: TrialRuntime


@dataclass(frozen=True)
class PersisterMaybeDied:
    error: BaseException


@dataclass(frozen=True)
class Placed:
    """The trial's actor is up on ``node_id`` (of host ``host``): record where."""

    node_id: str
    host: str | None


@dataclass(frozen=True)
class StartPersister:
    node_id: str


@dataclass(frozen=True)
class WantSpare:
    """A trial that may fail is up: have a warm spare of its shape (see ``spares.py``)."""

    resources: Any


FollowUp = (
    Placed
    | Upload
    | Stream
    | LoadStreamed
    | Kill
    | Collect
    | CheckBlobs
    | HostDied
    | Unclean
    | PersisterMaybeDied
    | StartPersister
    | WantSpare
)


class Outcomes:
    """Reads completions (see the module docstring)."""

    def __init__(
        self,
        *,
        uri_for: Callable[[str], str],
        local_path_for: Callable[[str], str | None],
        remote_storage: bool,
        refs: BlobRefs | None = None,
    ) -> None:
        self._refs = refs if refs is not None else BlobRefs()
        self._uri_for = uri_for
        self._local_path_for = local_path_for
        self._remote = remote_storage
        self._empty_said: set[str] = set()
        self.results = 0

    def read(self, pending: Pending, future: Any) -> tuple[Event | None, list[FollowUp]]:
        try:
            value = future.result()
        except BaseException as err:  # noqa: BLE001 - every failure becomes an event
            return self._failed(pending, err)
        rt, gen, kind, payload = pending.runtime, pending.generation, pending.kind, pending.payload
        if kind is CallKind.TRAIN:
            results = tuple(value) if isinstance(value, list) else (value,)
            self.results += len(results)
            return TrainResult(gen, results), []
        if kind is CallKind.READY:
            # One copy of each node's names for all its trials, not one a trial as they
            # came from the actor: a finished trial keeps where it ran (issue 36).
            node_id, host = (sys.intern(n) if type(n) is str else n for n in value)
            policy = rt.machine.policy
            checkpoints = policy.checkpoint_every > 0 or not policy.saves_on_demand  # a function
            wants_persister = checkpoints and self._remote
            follow: list[FollowUp] = [Placed(node_id, host)]
            if wants_persister:
                follow.append(StartPersister(node_id))
            if rt.spec.max_failures != 0:
                follow.append(WantSpare(rt.spec.resources))  # for when it fails
            return ActorReady(gen), follow
        if kind is CallKind.SAVE:
            assert isinstance(payload, SavePayload)
            if isinstance(value, str):  # saved to scratch, too big to commit in place
                return None, [Upload(pending, value)]
            suspects = self._refs.save_ended(payload.key, value)
            ckpt = Checkpoint(
                trial_id=rt.id,
                iteration=payload.iteration,
                key=payload.key,
                uri=self._uri_for(payload.key),
                path=self._local_path_for(payload.key),
                metrics=payload.metrics,
                manifest=value,
                node_id=payload.node_id,
                host=payload.host,
            )
            if gen != rt.machine.generation:
                # Committed after its actor was given up: nobody will ever list it.
                return None, [Collect(ckpt)]
            if suspects:  # names blobs deleted while it ran: counts once they are checked
                return None, [CheckBlobs(pending, value, suspects)]
            self._warn_if_empty(rt, ckpt, value)
            self._refs.hold(ckpt.key, value)
            return SaveDone(gen, ckpt), []
        if kind is CallKind.RESTORE:
            assert isinstance(payload, RestorePayload)
            if value == NOT_VISIBLE:  # not on this node's disk: stream it from one that sees it
                return None, [Stream(payload.checkpoint)]
            if value == CONFIG_REFUSED:
                return ConfigRefused(gen, payload.checkpoint), []
            return RestoreDone(gen, payload.checkpoint), []
        if kind is CallKind.FETCH:
            assert isinstance(payload, FetchPayload)
            if rt.machine.generation == gen and rt.actor is not None:
                return None, [LoadStreamed(payload.checkpoint, payload.staged)]
            return None, []
        # CallKind.STOP: the trial cleaned up; an actor it was the last trial of must go,
        # and so must one whose process is not clean (a function that would not end).
        assert isinstance(payload, StopPayload)
        if payload.actor is not None:
            return None, [Kill(payload.actor)]
        if value is False and payload.host is not None:
            return None, [Unclean(payload.host)]
        return None, []

    def _failed(self, pending: Pending, err: BaseException) -> tuple[Event | None, list[FollowUp]]:
        rt, gen, kind, payload = pending.runtime, pending.generation, pending.kind, pending.payload
        if kind is CallKind.STOP:
            assert isinstance(payload, StopPayload)
            return None, [Kill(payload.actor)] if payload.actor is not None else []
        if kind is CallKind.FETCH:
            assert isinstance(payload, FetchPayload)
            ckpt = payload.checkpoint
            log.warning("trial %s: could not stream %s to its node: %s", rt.id, ckpt.uri, err)
            return CheckpointUnavailable(gen, ckpt, err), []
        follow: list[FollowUp] = []
        if kind is CallKind.SAVE:
            assert isinstance(payload, SavePayload)
            self._refs.save_ended(payload.key, None)
            if isinstance(err, BlobCollected):  # the driver's check: storage is fine
                log.warning("trial %s: %s", rt.id, err)
                dropped = TrialError(rt.id, str(err), err)
                return SaveFailed(gen, payload.iteration, dropped, trains_on=True), []
            follow.append(PersisterMaybeDied(err))
        error = trial_error(rt, kind, err)
        if kind is CallKind.SAVE and isinstance(error.cause, StorageError):
            assert isinstance(payload, SavePayload)
            return SaveFailed(gen, payload.iteration, save_error(rt, payload, error)), follow
        died = is_lost(err)
        if died and gen == rt.machine.generation and rt.host is not None:
            follow.append(HostDied(rt))  # its other trials must not rejoin it
        if isinstance(error.cause, TrainableUnavailable):
            cause = TrialError(rt.id, str(error.cause), error.cause)
            return Failure(gen, cause, permanent=True), follow
        return Failure(gen, error, actor_died=died), follow

    def _warn_if_empty(self, rt: TrialRuntime, ckpt: Checkpoint, manifest: Any) -> None:
        if manifest.get("files") or rt.id in self._empty_said:
            return
        self._empty_said.add(rt.id)
        log.warning(
            "trial %s: save_checkpoint() wrote nothing into its directory: the checkpoint "
            "at iteration %d is empty, and a restore from it starts from nothing. Write the "
            "trainable's state into checkpoint_dir",
            rt.id,
            ckpt.iteration,
        )


def trial_error(rt: TrialRuntime, kind: CallKind, err: BaseException) -> TrialError:
    """The trial's error for a failed call of ``kind``, naming what failed and why."""
    name = rt.spec.trainable.__name__
    function = not getattr(rt.spec.trainable, "saves_on_demand", True)
    what = {
        CallKind.READY: f"{name}.setup() or actor start-up",
        CallKind.TRAIN: f"its function {name}" if function else f"{name}.step()",
        CallKind.SAVE: f"{name}.save_checkpoint() or its upload",
        CallKind.RESTORE: f"{name}.load_checkpoint() or its download",
    }.get(kind, kind.value)
    if is_lost(err):
        message = f"its actor or node died during {what}: {first_line(err)}"
        cause: BaseException = err
    else:
        cause = raised(err)
        if isinstance(cause, TrainableExited):
            message = f"{what} exited: {first_line(cause)}"
        else:
            message = f"{what} raised {type(cause).__name__}: {first_line(cause)}"
    error = TrialError(rt.id, message, cause)
    error.__cause__ = err
    return error


def save_error(rt: TrialRuntime, payload: SavePayload, error: TrialError) -> TrialError:
    """The error a trial pauses with when a checkpoint cannot be stored: what failed and
    the way on. A full disk or a file storage cannot keep is said at once (see
    ``actor_io.is_permanent``); an outage only after ``save_retry_for``."""
    assert error.cause is not None
    cause = error.cause
    kept = len(rt.machine.checkpoints)
    what = (
        "retrying cannot help"
        if is_permanent(cause)
        else "storage stayed unreachable for save_retry_for seconds"
    )
    intact = f"its {kept} earlier checkpoint(s) intact" if kept else "no checkpoint stored yet"
    message = (
        f"its checkpoint at iteration {payload.iteration} cannot be stored ({what}): "
        f"{type(cause).__name__}: {first_line(cause)}. The trial is paused ({intact}); once "
        "that is fixed, `await trial.resume()` continues it, and so does resuming the "
        "experiment (resume=True)"
    )
    paused = TrialError(rt.id, message, cause)
    paused.__cause__ = error.__cause__
    return paused


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:500]
    return type(err).__name__
