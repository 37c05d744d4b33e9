"""The trial state machine's vocabulary: the events that move it and the actions it
asks for. Small frozen dataclasses, no behaviour; see :mod:`orchestrator.core.machine`.
What anyone decides about a trial is one event, :class:`Decided`, carrying a
:mod:`~orchestrator.core.decisions` decision."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.core.checkpoints import Checkpoint
from orchestrator.core.decisions import Decision

# --------------------------------------------------------------------------- events


@dataclass(frozen=True)
class Event:
    """Base of every event."""


@dataclass(frozen=True)
class ActorEvent(Event):
    """An event that comes back from the trial's actor of one ``generation``."""

    generation: int


@dataclass(frozen=True)
class Launch(Event):
    """The orchestrator starts a PENDING trial."""


@dataclass(frozen=True)
class ActorReady(ActorEvent):
    """The actor exists and the trainable's ``setup`` returned."""


@dataclass(frozen=True)
class TrainResult(ActorEvent):
    """A train call returned the metrics of one or more steps, oldest first.

    The machine numbers them: each reported result gets ``training_iteration`` and
    ``trial_id``.
    """

    results: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class SaveDone(ActorEvent):
    """A checkpoint was written *and persisted* (its manifest is committed)."""

    checkpoint: Checkpoint


@dataclass(frozen=True)
class SaveFailed(ActorEvent):
    """The checkpoint was not persisted: storage stayed unreachable past the retry limit,
    or cannot keep it.

    Not a trial failure (the trainable is fine), but training on without a way to
    persist would risk losing ever more work, so the trial pauses with this error.
    ``trains_on``: storage is fine and only this save is lost (a blob it reused was
    collected meanwhile, ``BlobCollected``): the trial goes on and saves again.
    """

    iteration: int
    error: BaseException
    trains_on: bool = False


@dataclass(frozen=True)
class CheckpointUnavailable(ActorEvent):
    """``checkpoint`` cannot reach the trial's actor (no live node sees its files, say).
    The actor is fine: try the next older checkpoint with it."""

    checkpoint: Checkpoint
    error: BaseException


@dataclass(frozen=True)
class RestoreDone(ActorEvent):
    """The trainable loaded ``checkpoint`` (``None``: it was started fresh)."""

    checkpoint: Checkpoint | None


@dataclass(frozen=True)
class ConfigRefused(ActorEvent):
    """A restore with a new config reached a trainable that cannot take it in place (no
    ``reset_config``, or it returned False): a new actor must start with it."""

    checkpoint: Checkpoint


@dataclass(frozen=True)
class Failure(ActorEvent):
    """Work on the actor failed. ``actor_died`` tells a lost actor from a raised error;
    ``permanent``: retrying cannot help (the trainable cannot even be imported where the
    actor runs), so the trial goes to ERROR at once, whatever its failure budget."""

    error: BaseException
    actor_died: bool = False
    permanent: bool = False


@dataclass(frozen=True)
class GraceExpired(ActorEvent):
    """The grace period armed by :class:`ArmGrace` ``token`` is over: if the trial's
    actor still has not answered the stop or pause, it is stuck and must go."""

    token: int


@dataclass(frozen=True)
class SaveRequested(Event):
    """Save a checkpoint right after the trial's next result (its step in flight, or the
    next one); a trainable that saves only when it says so (a function) has nothing to
    save on demand, and a trial without an actor nothing to save: ignored."""


@dataclass(frozen=True)
class Decided(Event):
    """A decision about the trial, whoever made it: the user (``trial.stop()``,
    ``pause()``, ``resume()``, ``restore()``), a sweep's scheduler about a trial other
    than the one reporting, or the one a held trial waits for. The machine's table has a
    column for each kind of :class:`~orchestrator.core.decisions.Decision`."""

    decision: Decision


@dataclass(frozen=True)
class HooksCaughtUp(Event):
    """The trial's queued ``on_trial_result`` hooks have now processed ``seen`` of its
    results, counted since the experiment was entered (see :class:`WaitForHooks`)."""

    seen: int


# -------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Action:
    """Base of every action the loop must carry out."""


@dataclass(frozen=True)
class StartActor(Action):
    """Create the trial's actor (generation ``generation``) and run ``setup``.

    ``delay`` seconds to wait first (back-off after a failure). ``train``: the first
    train call, sent right behind ``setup`` (a fresh start: nothing to restore, so the
    first call is known now). The actor runs its calls in order, so the first step
    starts as setup ends, without a round trip to the driver in between; the machine
    counts the call as in flight from here.
    """

    generation: int
    delay: float = 0.0
    train: Train | None = None


@dataclass(frozen=True)
class Train(Action):
    """Run up to ``steps`` training steps in one call (more than 1 only when buffering),
    for at most ``slice_s`` seconds of steps when given (adaptive buffering).
    ``run_on``: no decision can fall on the ``steps``-th result, so a function trainable
    may go on into its next step while the call's results travel (it waits at its next
    report for the call that asks for it)."""

    generation: int
    steps: int = 1
    slice_s: float | None = None
    run_on: bool = False


@dataclass(frozen=True)
class Save(Action):
    """Save the trainable's state after ``iteration`` and persist it."""

    generation: int
    iteration: int


@dataclass(frozen=True)
class Restore(Action):
    """Load ``checkpoint`` into the trainable; with ``config``, reconfigure it first."""

    generation: int
    checkpoint: Checkpoint
    config: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ApplyConfig(Action):
    """From now on the trial runs with ``config`` (its next actor is set up with it)."""

    config: Mapping[str, Any]


@dataclass(frozen=True)
class StopActor(Action):
    """Release the actor of ``generation``: ``graceful`` lets it clean up first;
    ``stuck``: a call of the trial never returned, so its process is killed now, even
    when it hosts other trials (they are stuck behind that call too)."""

    generation: int
    graceful: bool = True
    stuck: bool = False


@dataclass(frozen=True)
class ArmGrace(Action):
    """Send :class:`GraceExpired` (``generation``, ``token``) in ``seconds``."""

    generation: int
    token: int
    seconds: float


@dataclass(frozen=True)
class Report(Action):
    """Record a result (``training_iteration`` already set) and run ``on_trial_result``."""

    result: Mapping[str, Any]


@dataclass(frozen=True)
class WaitForHooks(Action):
    """The trial trains no further until its result hooks have processed ``seen`` of its
    results: send :class:`HooksCaughtUp` then (at once if they already have)."""

    seen: int


@dataclass(frozen=True)
class RunStarted(Action):
    """A run (re)started at ``iteration``: results recorded after it belong to an
    abandoned timeline and leave the history (none, on a fresh start), as its
    checkpoints saved after it leave the machine's record."""

    iteration: int


@dataclass(frozen=True)
class DeleteCheckpoints(Action):
    """Garbage-collect these persisted checkpoints (off the loop's critical path)."""

    checkpoints: tuple[Checkpoint, ...]


@dataclass(frozen=True)
class ReleaseCheckpoint(Action):
    """The trial's timeline no longer starts from ``checkpoint``, which is not one of its
    own checkpoints (another trial's, after an exploit): delete it unless its owner's
    timeline keeps it. Other trials whose timelines start from it keep it pinned."""

    checkpoint: Checkpoint


@dataclass(frozen=True)
class Notify(Action):
    """Run the hook ``name`` (``on_trial_start``, ``on_trial_error``...) with ``args``."""

    hook: str
    args: tuple[Any, ...] = ()
