"""The Ray actor that hosts trainables (:class:`~orchestrator.actor.trainable.Trainable`).

The actor wraps each trainable
so that the driver never waits on it: every call returns an ``ObjectRef`` that the loop
awaits together with all the others.

The actor is a plain single-threaded Ray actor, which runs the trainable's calls
strictly in the order the driver issued them. Checkpoints are saved into node-local
scratch space and uploaded by the node's persister (:mod:`orchestrator.actor.persister`) while
training goes on; the driver never relays checkpoint bytes.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import socket
import tempfile
from collections.abc import Mapping
from typing import Any

import ray

from orchestrator.actor.io import ActorIO
from orchestrator.actor.scratch import fresh_dir, remove_dead_scratch, remove_stale_fetches
from orchestrator.actor.stepping import exited, one_step, run_steps
from orchestrator.actor.trainable import Trainable
from orchestrator.core.wire import CONFIG_REFUSED, NOT_VISIBLE


class _Awaiter:
    """Runs what an ``async def`` trainable method returns, on the actor's own loop.

    The loop runs only while a trainable call does: a trainable's background tasks
    make progress during its calls, not between them.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    def call(self, fn: Any, *args: Any) -> Any:
        try:
            result = fn(*args)
            if inspect.isawaitable(result):
                if self._loop is None:
                    self._loop = asyncio.new_event_loop()
                result = self._loop.run_until_complete(result)
        except SystemExit as err:
            raise exited(err) from err
        return result

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None


class _HostedTrial:
    """One trial inside a trial actor: its trainable, call counter and scratch space."""

    def __init__(
        self,
        trainable_cls: type[Trainable],
        trial_id: str,
        generation: int,
        stop: Any,
        scratch_parent: str,
    ) -> None:
        self.cls = trainable_cls
        self.trial_id = trial_id
        self.generation = generation
        self.stop = stop
        self.trainable: Trainable | None = None
        self.next_seq = 0
        self.time_total = 0.0  # seconds in step(), restored with checkpoints
        self.deferred: Exception | None = None  # a buffered step's error, for the next call
        # A restore's download started at setup: (key, directory, its future).
        self.prefetch: tuple[str, str, Any] | None = None
        self.awaiter = _Awaiter()
        self.scratch = os.path.join(scratch_parent, f"{trial_id}-g{generation}-{os.getpid()}")

    def restore_dir(self, checkpoint: Mapping[str, Any]) -> str:
        return os.path.join(self.scratch, f"restore_{checkpoint['iteration']:06d}")

    def start_prefetch(self, io: ActorIO, checkpoint: Mapping[str, Any]) -> None:
        """Start downloading ``checkpoint`` for the restore that will follow setup.
        With local storage only if this process sees it (else the restore asks for it
        to be streamed, as without a prefetch)."""
        path = checkpoint.get("path")
        if path:
            from orchestrator.actor.locality import is_visible

            if not is_visible(str(path), checkpoint.get("manifest")):
                return
        target = self.restore_dir(checkpoint)
        self.prefetch = (str(checkpoint["key"]), target, io.start_fetch(checkpoint["key"], target))

    def take_prefetch(self, checkpoint: Mapping[str, Any]) -> str | None:
        """The directory the prefetch of ``checkpoint`` downloaded into (waiting for it),
        or None when none was started for it (or it failed: the restore fetches it
        again, and reports that error if it persists)."""
        prefetch, self.prefetch = self.prefetch, None
        if prefetch is None or prefetch[0] != checkpoint["key"]:
            return None
        try:
            prefetch[2].result()
        except Exception:
            return None
        return prefetch[1]

    def turn(self, seq: int) -> None:
        if seq != self.next_seq:
            raise RuntimeError(
                f"trial {self.trial_id}: call #{seq} arrived while #{self.next_seq} was "
                "expected; Ray did not keep the submission order"
            )
        self.next_seq += 1

    def require(self) -> Trainable:
        if self.trainable is None:
            raise RuntimeError(f"trial {self.trial_id}: the trainable is not set up")
        return self.trainable

    def release(self) -> bool:
        """Run the trainable's cleanup (best effort) and drop its scratch space, and
        that of killed actors on this host (see :func:`remove_dead_scratch`); whether
        the process is clean (False: a function trainable's thread would not end, so no
        other trial may reuse this process).

        A predecessor killed just before this generation's :meth:`TrialActor.setup`
        may not have been reaped yet when setup looked; by now it has.
        """
        try:
            if self.trainable is not None:
                self.awaiter.call(self.trainable.cleanup)
            return not getattr(self.trainable, "abandoned", False)
        finally:
            self.trainable = None
            self.awaiter.close()
            shutil.rmtree(self.scratch, ignore_errors=True)
            remove_dead_scratch(self.scratch)


class TrialActor:
    """Hosts one trial's trainable, or several (``trials_per_worker``). Created by the
    loop as a Ray actor (see ``RemoteTrialActor``); every call names its trial.

    A plain single-threaded actor: Ray runs one caller's calls to it strictly in the
    order they were submitted (it numbers them), so train, save and restore never
    overtake each other. The ``seq`` each call carries only double-checks that. No
    method here may be ``async def`` (Ray would make it an async actor, whose dispatch
    costs two to three times the CPU per call), and it has no concurrency groups (they
    route every call through a thread pool): uploads are the node's persister's job
    (:mod:`orchestrator.actor.persister`), so a save returns as soon as it is written.

    Trials sharing an actor share its process: one worker start-up instead of several
    (most of a short trial's cost), one storage client, and a failing ``step()`` still
    fails only its own trial; the death of the process fails them all.

    Where it runs (:meth:`_where`), its node's scratch space (:meth:`_scratch_parent`)
    and its log prefix (:meth:`_announce`) are the methods an in-process test double
    (``tests/support/fakeray.py``) overrides; everything else runs as in a worker.
    """

    def __init__(self, storage_uri: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self._io = ActorIO(storage_uri, storage_options or {})
        self._trials: dict[str, _HostedTrial] = {}

    def _trial(self, trial_id: str, seq: int) -> _HostedTrial:
        hosted = self._trials.get(trial_id)
        if hosted is None:
            raise RuntimeError(f"trial {trial_id}: not hosted by this actor")
        hosted.turn(seq)
        return hosted

    # -- trainable calls (one thread, in submission order) -----------------------------

    def setup(
        self,
        trial_id: str,
        generation: int,
        payload: bytes,
        prefetch: Mapping[str, Any] | None = None,
    ) -> tuple[str, str]:
        """Start hosting ``trial_id`` (call #0 of this generation); returns the node's id
        and host name.

        ``payload`` is the pickled ``(trainable class, config, stop condition)``, loaded
        here rather than by Ray so that a trainable this worker cannot import is reported
        as what it is (:class:`TrainableUnavailable`, not retried) instead of a generic
        task failure that the driver would retry again and again.

        ``prefetch``: the checkpoint this actor will restore (a restart after a
        failure): its download starts now, beside the trainable's ``setup``, and the
        ``restore`` call that follows waits for it instead of starting it."""
        trainable_cls, config, stop = _load_payload(payload)
        previous = self._trials.pop(trial_id, None)
        if previous is not None:  # an earlier generation this actor hosted: replaced
            previous.release()
        hosted = _HostedTrial(trainable_cls, trial_id, generation, stop, self._scratch_parent())
        hosted.turn(0)
        if prefetch is not None:
            hosted.start_prefetch(self._io, prefetch)
        remove_dead_scratch(hosted.scratch)
        remove_stale_fetches(trial_id, generation)
        trainable = trainable_cls()
        trainable.config = config
        trainable.trial_id = trial_id
        trainable.iteration = 0
        trainable._trialflow_scratch = hosted.scratch  # type: ignore[attr-defined]
        hosted.awaiter.call(trainable.setup, config)
        hosted.trainable = trainable
        self._trials[trial_id] = hosted
        self._announce()
        return self._where()

    def _where(self) -> tuple[str, str]:
        """This process's node id and host name."""
        return str(ray.get_runtime_context().get_node_id()), socket.gethostname()

    def _scratch_parent(self) -> str:
        """Where this host's trial actors keep their scratch directories."""
        return os.path.join(tempfile.gettempdir(), "trialflow", socket.gethostname())

    def _announce(self) -> None:
        _announce_log_name(self._trials)

    def train(
        self, trial_id: str, seq: int, run_on: bool = False
    ) -> dict[str, Any] | list[dict[str, Any]]:
        """One step. ``run_on``: no decision can fall on its result, so a function
        trainable may go on into its next step meanwhile (:meth:`train_many`)."""
        return one_step(self._trial(trial_id, seq), run_on, len(self._trials) == 1)

    def train_sole(self) -> dict[str, Any] | list[dict[str, Any]]:
        """:meth:`train` for an actor that hosts one trial. It takes no arguments on
        purpose: Ray skips binding and serialising arguments for such a call, a tenth
        of the driver's cost per step."""
        return one_step(self._sole(), False, True)

    def train_sole_run_on(self) -> dict[str, Any] | list[dict[str, Any]]:
        """:meth:`train_sole` with ``run_on`` (see :meth:`train`), its own method so
        that it too takes no arguments."""
        return one_step(self._sole(), True, True)

    def _sole(self) -> _HostedTrial:
        if len(self._trials) != 1:
            raise RuntimeError(f"train_sole() on an actor hosting {len(self._trials)} trials")
        (hosted,) = self._trials.values()
        hosted.next_seq += 1
        return hosted

    def train_many(
        self,
        trial_id: str,
        seq: int,
        limit: int,
        slice_s: float | None = None,
        run_on: bool = False,
    ) -> list[dict[str, Any]]:
        """Run up to ``limit`` steps in one call, stopping early at the stop condition,
        and, with ``slice_s``, once that many seconds of steps have run (adaptive
        buffering: a long step returns alone, short ones come back in batches).

        The condition sees results numbered as the driver will number them, so an actor
        that runs ahead never runs past a stop condition, and no result is thrown away.

        ``run_on``: the driver makes no decision on the ``limit``-th result (nor on any
        before it, which is why it is the limit), so a function trainable goes on into
        its next step while this call's results travel, unless the stop condition was
        met or the step took longer than :data:`RUN_ON_MAX_STEP_S` (see
        :mod:`orchestrator.actor.function`). Only in an actor that hosts this trial
        alone: trials sharing a process never ran their functions at the same time, and
        a user's function may rely on that (a global seed, the working directory).
        """
        alone = len(self._trials) == 1
        return run_steps(self._trial(trial_id, seq), limit, slice_s, run_on, alone)

    def save(self, trial_id: str, seq: int, iteration: int) -> str:
        """Write a checkpoint into node-local scratch space; returns its directory."""
        hosted = self._trial(trial_id, seq)
        trainable = hosted.require()
        local_dir = fresh_dir(os.path.join(hosted.scratch, f"checkpoint_{iteration:06d}-{seq}"))
        hosted.awaiter.call(trainable.save_checkpoint, local_dir)
        return local_dir

    def save_and_commit(
        self, trial_id: str, seq: int, iteration: int, key: str
    ) -> dict[str, Any] | str:
        """:meth:`save`, then commit it here if storage is a local directory and the
        checkpoint small (:meth:`ActorIO.commit_small`): returns its manifest (a dict).
        Otherwise returns the checkpoint's scratch directory (a str), for the node's
        persister to upload."""
        local_dir = self.save(trial_id, seq, iteration)
        manifest = self._io.commit_small(trial_id, local_dir, key)
        return local_dir if manifest is None else manifest

    def save_and_persist(
        self,
        trial_id: str,
        seq: int,
        iteration: int,
        key: str,
        retry_for: float,
        follows: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        """:meth:`save`, then upload and commit it here; returns the manifest. For the
        time before the node's persister is up (see :mod:`orchestrator.actor.persister`)."""
        local_dir = self.save(trial_id, seq, iteration)
        return self._io.persist(trial_id, local_dir, key, retry_for, follows)

    def restore(
        self,
        trial_id: str,
        seq: int,
        checkpoint: Mapping[str, Any],
        local_dir: str | None = None,
        look_first: bool = False,
        config: Mapping[str, Any] | None = None,
    ) -> str | None:
        """Load ``checkpoint``: from ``local_dir`` when the driver already streamed it to
        this node (it is removed afterwards), else from storage.

        With ``look_first`` (local storage the nodes may not share) the checkpoint is
        loaded only if this process sees it, committed and complete, at its path;
        otherwise nothing is loaded and :data:`NOT_VISIBLE` is returned, for the driver
        to stream it from a node that sees it (see :mod:`orchestrator.actor.locality`). With
        ``config`` the trainable's ``reset_config`` must take it first; if it does not,
        nothing is loaded and :data:`CONFIG_REFUSED` is returned (a new actor is then set
        up with the config)."""
        hosted = self._trial(trial_id, seq)
        trainable = hosted.require()
        if look_first and local_dir is None:
            from orchestrator.actor.locality import is_visible

            path = checkpoint.get("path")
            if not path or not is_visible(str(path), checkpoint.get("manifest")):
                return NOT_VISIBLE
        if config is not None:  # a new config: in place, or not at all
            if not hosted.awaiter.call(trainable.reset_config, dict(config)):
                return CONFIG_REFUSED
            trainable.config = dict(config)
        if local_dir is not None:
            source = local_dir
        else:
            source = hosted.take_prefetch(checkpoint) or self._io.fetch(
                str(checkpoint["key"]), hosted.restore_dir(checkpoint)
            )
        try:
            hosted.awaiter.call(trainable.load_checkpoint, source)
        finally:
            shutil.rmtree(source, ignore_errors=True)
        trainable.iteration = int(checkpoint["iteration"])
        total = (checkpoint.get("metrics") or {}).get("time_total_s")
        hosted.time_total = float(total) if isinstance(total, (int, float)) else 0.0
        return None

    def stop(self, trial_id: str, seq: int) -> bool:
        """Stop hosting ``trial_id``: its cleanup runs, its scratch space goes. False:
        the process is not clean any more (see ``_HostedTrial.release``)."""
        self._trial(trial_id, seq)
        return self._trials.pop(trial_id).release()

    def drop(self, trial_id: str, generation: int) -> None:
        """Forget a failed trial's ``generation`` without asking it anything more."""
        hosted = self._trials.get(trial_id)
        if hosted is not None and hosted.generation == generation:
            del self._trials[trial_id]
            try:
                hosted.release()
            except Exception:  # its cleanup failing is no news: the trial already failed
                pass

    def shutdown(self, stopped: None = None) -> None:
        """Close storage; runs after the last :meth:`stop` (its ref) before the actor goes."""
        self._io.close()


RemoteTrialActor: Any = ray.remote(TrialActor)


def _load_payload(payload: bytes) -> tuple[Any, dict[str, Any], Any]:
    import sys

    from ray import cloudpickle

    from orchestrator.errors import TrainableUnavailable

    try:
        trainable_cls, config, stop = cloudpickle.loads(payload)
    except Exception as err:
        module = getattr(err, "name", None)
        what = f"module {module!r}" if isinstance(err, ImportError) and module else "its code"
        raise TrainableUnavailable(
            f"its trainable cannot be loaded by the worker process on host "
            f"{socket.gethostname()}: {what} is missing there ({type(err).__name__}: {err}). "
            f"The worker's sys.path is {sys.path}; install the module on every node, or "
            "ship it with Orchestrator(runtime_env={'working_dir': '.'}) (or "
            "{'py_modules': [...]})"
        ) from err
    return trainable_cls, config, stop


def _announce_log_name(trials: Mapping[str, Any]) -> None:
    """Name this worker's output after the trials it hosts: Ray's log monitor prefixes
    the lines that follow ``:actor_name:<name>`` with that name (its own protocol, also
    how an actor's ``__repr__`` reaches the prefix), so users see ``(trial X pid=...)``
    instead of ``(TrialActor pid=...)``."""
    import sys

    try:
        from ray._private.ray_constants import LOG_PREFIX_ACTOR_NAME
    except ImportError:  # a Ray without it: keep Ray's own prefix
        return
    ids = list(trials)
    if not ids:
        return
    name = f"trial {ids[0]}" if len(ids) == 1 else f"trials {', '.join(ids[:3])}"
    if len(ids) > 3:
        name += f" +{len(ids) - 3}"
    for stream in (sys.stdout, sys.stderr):
        print(LOG_PREFIX_ACTOR_NAME + name, file=stream, flush=True)
