"""The user's base class, :class:`Trainable`, and the Ray actor that hosts it.

A trainable is ordinary Python: ``setup``, ``step``, ``save_checkpoint`` and
``load_checkpoint``, each either a plain or an ``async def`` method. The actor wraps it
so that the driver never waits on it: every call returns an ``ObjectRef`` that the loop
awaits together with all the others.

The actor is an *async* actor with two concurrency groups. The default group runs the
trainable's calls strictly in the order the driver issued them (a sequence gate, since
Ray does not promise order for async actors). The ``io`` group persists checkpoints to
storage, so a slow upload never holds up the next training step, and the actor itself
uploads: the driver never relays checkpoint bytes.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import random
import shutil
import tempfile
import time
from collections.abc import Awaitable, Mapping
from typing import Any

import ray

log = logging.getLogger("orchestrator.actor")


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


async def _call(fn: Any, *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


class TrialActor:
    """Hosts one trial's trainable. Created by the loop as a Ray actor (see ``ACTOR``)."""

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
        self._storage_uri = storage_uri
        self._storage_options = dict(storage_options or {})
        self._trainable: Trainable | None = None
        self._next_seq = 0
        self._turn = asyncio.Condition()
        self._scratch = os.path.join(
            tempfile.gettempdir(), "trialflow", f"{trial_id}-g{generation}-{os.getpid()}"
        )
        # One storage client per event loop: the default and the io concurrency groups
        # each run their own loop, and async SDK clients are bound to the loop they use.
        self._storages: dict[int, Any] = {}

    # -- ordering ------------------------------------------------------------------

    async def _wait_turn(self, seq: int) -> None:
        if seq == self._next_seq:
            return
        async with self._turn:
            await self._turn.wait_for(lambda: self._next_seq == seq)

    async def _done_turn(self) -> None:
        self._next_seq += 1
        async with self._turn:
            self._turn.notify_all()

    # -- trainable calls (default group, strictly ordered) --------------------------

    async def setup(self, seq: int, config: dict[str, Any]) -> str:
        await self._wait_turn(seq)
        try:
            _remove_dead_scratch(self._scratch)
            trainable = self._cls()
            trainable.config = config
            trainable.trial_id = self._trial_id
            trainable.iteration = 0
            await _call(trainable.setup, config)
            self._trainable = trainable
            return str(ray.get_runtime_context().get_node_id())
        finally:
            await self._done_turn()

    async def train(self, seq: int) -> dict[str, Any]:
        await self._wait_turn(seq)
        try:
            return await self._step()
        finally:
            await self._done_turn()

    async def train_many(self, seq: int, limit: int) -> list[dict[str, Any]]:
        """Run up to ``limit`` steps in one call, stopping early at the stop condition.

        The condition sees results numbered as the driver will number them, so an actor
        that runs ahead never runs past a stop condition, and no result is thrown away.
        """
        await self._wait_turn(seq)
        try:
            results: list[dict[str, Any]] = []
            for _ in range(limit):
                result = await self._step()
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
        finally:
            await self._done_turn()

    async def _step(self) -> dict[str, Any]:
        trainable = self._require()
        start = time.perf_counter()
        result = await _call(trainable.step)
        if not isinstance(result, dict):
            raise TypeError(
                f"trial {self._trial_id}: {type(trainable).__name__}.step() must return a "
                f"dict of metrics, got {type(result).__name__}"
            )
        trainable.iteration += 1
        result.setdefault("time_this_iter_s", time.perf_counter() - start)
        return result

    async def save(self, seq: int, iteration: int) -> str:
        """Write a checkpoint into node-local scratch space; returns its directory."""
        await self._wait_turn(seq)
        try:
            trainable = self._require()
            local_dir = _fresh_dir(os.path.join(self._scratch, f"checkpoint_{iteration:06d}-{seq}"))
            await _call(trainable.save_checkpoint, local_dir)
            return local_dir
        finally:
            await self._done_turn()

    async def restore(
        self, seq: int, checkpoint: Mapping[str, Any], local_dir: str | None = None
    ) -> None:
        """Load ``checkpoint``: from ``local_dir`` when the driver already streamed it to
        this node (it is removed afterwards), else downloaded from storage."""
        await self._wait_turn(seq)
        try:
            trainable = self._require()
            source = local_dir if local_dir is not None else await self._fetch(checkpoint)
            try:
                await _call(trainable.load_checkpoint, source)
            finally:
                if local_dir is not None:
                    shutil.rmtree(local_dir, ignore_errors=True)
            trainable.iteration = int(checkpoint["iteration"])
        finally:
            await self._done_turn()

    async def stop(self, seq: int) -> None:
        await self._wait_turn(seq)
        try:
            if self._trainable is not None:
                await _call(self._trainable.cleanup)
        finally:
            await self._done_turn()
            await self._close_storage()

    # -- storage (io group, concurrent with training) --------------------------------

    @ray.method(concurrency_group="io")
    async def persist(self, local_dir: str, key: str, retry_for: float = 300.0) -> dict[str, Any]:
        """Upload a saved checkpoint and commit its manifest; returns the manifest.

        ``local_dir`` arrives as the result of :meth:`save` (the driver passes that
        call's ObjectRef), so this starts exactly when the save is written, and runs
        while the next step trains. While storage is unreachable the upload is retried
        for up to ``retry_for`` seconds (training goes on meanwhile); an uncommitted
        attempt is never visible as a checkpoint.
        """
        from storage import StorageError

        storage = await self._open_storage()
        deadline = time.monotonic() + retry_for
        delay = 0.2
        while True:
            try:
                manifest = await storage.put_checkpoint(local_dir, key)
                break
            except StorageError as err:
                if _is_permanent(err) or time.monotonic() + delay > deadline:
                    raise
                log.warning(
                    "trial %s: persisting %s failed, retrying in %.1f s: %s",
                    self._trial_id,
                    key,
                    delay,
                    err,
                )
                await asyncio.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 5.0)
        shutil.rmtree(local_dir, ignore_errors=True)
        return dict(manifest.to_dict())

    @ray.method(concurrency_group="io")
    async def shutdown(self, stopped: None = None) -> None:
        """Close storage and drop scratch space; runs after :meth:`stop` (its ref)."""
        await self._close_storage()
        shutil.rmtree(self._scratch, ignore_errors=True)

    # -- internals --------------------------------------------------------------------

    def _require(self) -> Trainable:
        if self._trainable is None:
            raise RuntimeError(f"trial {self._trial_id}: the trainable is not set up")
        return self._trainable

    async def _open_storage(self) -> Any:
        loop_id = id(asyncio.get_running_loop())
        storage = self._storages.get(loop_id)
        if storage is None:
            from storage import open_storage

            storage = open_storage(self._storage_uri, **self._storage_options)
            self._storages[loop_id] = storage
        return storage

    async def _close_storage(self) -> None:
        storage = self._storages.pop(id(asyncio.get_running_loop()), None)
        if storage is not None:
            await storage.aclose()

    async def _fetch(self, checkpoint: Mapping[str, Any]) -> str:
        local_dir = os.path.join(self._scratch, f"restore_{checkpoint['iteration']:06d}")
        shutil.rmtree(local_dir, ignore_errors=True)
        storage = await self._open_storage()
        await storage.get_checkpoint(str(checkpoint["key"]), local_dir)
        return local_dir


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


def _is_permanent(err: BaseException) -> bool:
    """Storage errors that waiting will not fix (retrying them only delays the news)."""
    from storage import BucketNotFound, InvalidKey, PermissionDenied, UnsupportedURI

    return isinstance(err, (BucketNotFound, InvalidKey, PermissionDenied, UnsupportedURI))


def _fresh_dir(path: str) -> str:
    """An empty directory at ``path`` (a leftover from a failed attempt is removed)."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def is_trainable_class(obj: object) -> bool:
    return isinstance(obj, type) and issubclass(obj, Trainable)
