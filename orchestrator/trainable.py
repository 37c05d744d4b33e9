"""The user's base class, :class:`Trainable`, and the Ray actor that hosts it.

A trainable is ordinary Python: ``setup``, ``step``, ``save_checkpoint`` and
``load_checkpoint``, each either a plain or an ``async def`` method. The actor wraps it
so that the driver never waits on it: every call returns an ``ObjectRef`` that the loop
awaits together with all the others.

The actor is a plain threaded Ray actor: its default group (one thread) runs the
trainable's calls strictly in the order the driver issued them, and its ``io`` group
persists checkpoints to storage, so a slow upload never holds up the next training
step. The actor itself uploads: the driver never relays checkpoint bytes.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Mapping
from typing import Any

import ray

from .actor_io import ActorIO


class Trainable:
    """Subclass this and implement :meth:`step` (and the others as needed).

    Attributes set by the framework before :meth:`setup` runs: ``config`` (the trial's
    config dict), ``trial_id``, and ``iteration`` (completed steps, kept up to date,
    restored with checkpoints).
    """

    config: dict[str, Any]
    trial_id: str
    iteration: int

    def setup(self, config: dict[str, Any]) -> None | Awaitable[None]:
        """Build the model, load data... Called once per actor, before anything else."""
        return None

    def step(self) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        """Run one training iteration and return its metrics as a dict."""
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def save_checkpoint(self, checkpoint_dir: str) -> None | Awaitable[None]:
        """Write everything needed to resume into ``checkpoint_dir`` (it exists, empty)."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement save_checkpoint() to be checkpointed"
        )

    def load_checkpoint(self, checkpoint_dir: str) -> None | Awaitable[None]:
        """Restore the state that :meth:`save_checkpoint` wrote into ``checkpoint_dir``."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement load_checkpoint() to be restored"
        )

    def cleanup(self) -> None | Awaitable[None]:
        """Release resources when the trial stops or pauses (best effort)."""
        return None


class _Awaiter:
    """Runs what an ``async def`` trainable method returns, on the actor's own loop.

    The loop runs only while a trainable call does: a trainable's background tasks
    make progress during its calls, not between them.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    def call(self, fn: Any, *args: Any) -> Any:
        result = fn(*args)
        if inspect.isawaitable(result):
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            result = self._loop.run_until_complete(result)
        return result

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None


class TrialActor:
    """Hosts one trial's trainable. Created by the loop as a Ray actor (see ``ACTOR``).

    A plain threaded actor: its default group has one thread, and Ray runs one
    caller's calls to such an actor strictly in the order they were submitted (it
    numbers them), so train, save and restore never overtake each other. The ``seq``
    each call carries only double-checks that. Uploads run in the ``io`` group's
    threads, beside training. No method here may be ``async def``: Ray would make it
    an async actor, whose dispatch costs two to three times the CPU per call.
    """

    def __init__(
        self,
        trainable_cls: type[Trainable],
        trial_id: str,
        generation: int,
        storage_uri: str,
        storage_options: Mapping[str, Any] | None = None,
        stop: Any = None,
    ) -> None:
        self._cls = trainable_cls
        self._stop = stop
        self._trial_id = trial_id
        self._trainable: Trainable | None = None
        self._next_seq = 0
        self._awaiter = _Awaiter()
        self._io = ActorIO(trial_id, storage_uri, storage_options or {})
        self._scratch = os.path.join(
            tempfile.gettempdir(), "trialflow", f"{trial_id}-g{generation}-{os.getpid()}"
        )

    def _turn(self, seq: int) -> None:
        if seq != self._next_seq:
            raise RuntimeError(
                f"trial {self._trial_id}: call #{seq} arrived while #{self._next_seq} was "
                "expected; Ray did not keep the submission order"
            )
        self._next_seq += 1

    # -- trainable calls (default group: one thread, in submission order) -------------

    def setup(self, seq: int, config: dict[str, Any]) -> str:
        self._turn(seq)
        _remove_dead_scratch(self._scratch)
        trainable = self._cls()
        trainable.config = config
        trainable.trial_id = self._trial_id
        trainable.iteration = 0
        self._awaiter.call(trainable.setup, config)
        self._trainable = trainable
        return str(ray.get_runtime_context().get_node_id())

    def train(self, seq: int) -> dict[str, Any]:
        self._turn(seq)
        return self._step()

    def train_many(self, seq: int, limit: int) -> list[dict[str, Any]]:
        """Run up to ``limit`` steps in one call, stopping early at the stop condition.

        The condition sees results numbered as the driver will number them, so an actor
        that runs ahead never runs past a stop condition, and no result is thrown away.
        """
        self._turn(seq)
        results: list[dict[str, Any]] = []
        for _ in range(limit):
            result = self._step()
            results.append(result)
            if self._stop is not None:
                numbered = {
                    **result,
                    "training_iteration": self._require().iteration,
                    "trial_id": self._trial_id,
                }
                if self._stop(numbered):
                    break
        return results

    def _step(self) -> dict[str, Any]:
        trainable = self._require()
        start = time.perf_counter()
        result = self._awaiter.call(trainable.step)
        if not isinstance(result, dict):
            raise TypeError(
                f"trial {self._trial_id}: {type(trainable).__name__}.step() must return a "
                f"dict of metrics, got {type(result).__name__}"
            )
        trainable.iteration += 1
        result.setdefault("time_this_iter_s", time.perf_counter() - start)
        return result

    def save(self, seq: int, iteration: int) -> str:
        """Write a checkpoint into node-local scratch space; returns its directory."""
        self._turn(seq)
        trainable = self._require()
        local_dir = _fresh_dir(os.path.join(self._scratch, f"checkpoint_{iteration:06d}-{seq}"))
        self._awaiter.call(trainable.save_checkpoint, local_dir)
        return local_dir

    def restore(
        self, seq: int, checkpoint: Mapping[str, Any], local_dir: str | None = None
    ) -> None:
        """Load ``checkpoint``: from ``local_dir`` when the driver already streamed it to
        this node (it is removed afterwards), else downloaded from storage."""
        self._turn(seq)
        trainable = self._require()
        if local_dir is None:
            target = os.path.join(self._scratch, f"restore_{checkpoint['iteration']:06d}")
            source = self._io.fetch(str(checkpoint["key"]), target)
        else:
            source = local_dir
        try:
            self._awaiter.call(trainable.load_checkpoint, source)
        finally:
            shutil.rmtree(source, ignore_errors=True)
        trainable.iteration = int(checkpoint["iteration"])

    def stop(self, seq: int) -> None:
        self._turn(seq)
        try:
            if self._trainable is not None:
                self._awaiter.call(self._trainable.cleanup)
        finally:
            self._awaiter.close()

    # -- storage (io group, concurrent with training) --------------------------------

    @ray.method(concurrency_group="io")
    def persist(self, local_dir: str, key: str, retry_for: float = 300.0) -> dict[str, Any]:
        """Upload a saved checkpoint and commit its manifest; returns the manifest.

        ``local_dir`` arrives as the result of :meth:`save` (the driver passes that
        call's ObjectRef), so this starts exactly when the save is written, and runs
        while the next step trains. While storage is unreachable the upload is retried
        for up to ``retry_for`` seconds (training goes on meanwhile).
        """
        return self._io.persist(local_dir, key, retry_for)

    @ray.method(concurrency_group="io")
    def shutdown(self, stopped: None = None) -> None:
        """Close storage and drop scratch space; runs after :meth:`stop` (its ref)."""
        self._io.close()
        shutil.rmtree(self._scratch, ignore_errors=True)

    # -- internals --------------------------------------------------------------------

    def _require(self) -> Trainable:
        if self._trainable is None:
            raise RuntimeError(f"trial {self._trial_id}: the trainable is not set up")
        return self._trainable


#: How many storage operations (uploads) one actor runs at once beside its training.
IO_CONCURRENCY = 2

RemoteTrialActor: Any = ray.remote(concurrency_groups={"io": IO_CONCURRENCY})(  # type: ignore[call-overload]
    TrialActor
)


def _remove_dead_scratch(own: str) -> None:
    """Drop the scratch directories that killed actors of this trial left on this node.

    A SIGKILLed actor cannot clean up after itself; its directory (named
    ``<trial>-g<generation>-<pid>``) is removed once its process is gone.
    """
    parent, name = os.path.split(own)
    trial_part = name.rsplit("-g", 1)[0]
    try:
        entries = os.listdir(parent)
    except FileNotFoundError:
        return
    for entry in entries:
        if entry == name or entry.rsplit("-g", 1)[0] != trial_part:
            continue
        try:
            pid = int(entry.rsplit("-", 1)[1])
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)
        except (ValueError, IndexError, PermissionError):
            continue


def _fresh_dir(path: str) -> str:
    """An empty directory at ``path`` (a leftover from a failed attempt is removed)."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def is_trainable_class(obj: object) -> bool:
    return isinstance(obj, type) and issubclass(obj, Trainable)
