"""The :class:`TrackerHook`: one tracker run per trial, fed off the trials' path.

The hook methods are *inline* (the hook runner calls them at once, in the loop, and a
trial never waits for them): they only decide and queue. One worker thread, started by
the first call, drains the queue into the backend (MLflow, W&B...), so a slow or
unreachable tracker never slows a trial, a pause or the loop:

* the queue holds at most ``max_pending`` results; past that, results are dropped and
  counted, with one warning naming the tracker (a trial's start, end and rollbacks are
  never dropped: they are few);
* ``on_experiment_end`` (and :meth:`TrackerHook.aclose`) waits for the queue to drain,
  off the loop, while the tracker gets on: one that completes no call for
  ``close_grace`` seconds is abandoned with one warning naming what it did not get (its
  thread is a daemon). The wait is bounded: the queue is.

Semantics (what Ray Tune's trackers get wrong): a trial's run is found again by the
trial's id, so a trial restarted after a failure, paused and resumed, or resumed by a
new driver continues *its* run. A run's steps are the trials' ``training_iteration`` and
only ever grow: a result at a step the run already holds (the re-run after a rollback
to an older checkpoint) is not logged again. The rollback is *marked* instead: the
first step logged after it carries the metric ``trialflow/rollback``, the iteration the
trial went back to, so a reader knows the steps from there to the one before it hold
the abandoned run's values. (W&B refuses a step that goes back, and MLflow would keep
both values of a step: marking is the one rule both can hold.)
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.core.trial_history import (
    TRAINING_ITERATION,
    history_before,
    iteration_of,
    results_of,
)
from orchestrator.errors import ConfigError
from orchestrator.integrations.backend import (
    Backend,
    RunHandle,
    TrialRun,
    metrics_of,
)

__all__ = ["ROLLBACK_METRIC", "TrackerHook", "TrackerStatistics"]

log = logging.getLogger("orchestrator.integrations")

ROLLBACK_METRIC = "trialflow/rollback"
#: What a pickled hook keeps: what it was made with.
_OPTIONS = ("backend", "_run_name", "_artifact_dir", "_excludes", "_max_pending", "_close_grace")
#: Ops the worker takes from the queue at once (one backend call per trial for them).
_BATCH = 1000


@dataclass(frozen=True)
class TrackerStatistics:
    """Counters since the hook was made."""

    results: int  # results received
    sent: int  # steps the backend stored
    replayed: int  # results at a step the run already held (after a rollback): not sent
    dropped: int  # results dropped because the queue was full
    pending: int  # results queued now
    failures: int  # backend calls that raised


# -- the queue's operations ------------------------------------------------------------------


@dataclass(frozen=True)
class _Open:
    trial: TrialRun
    history: Sequence[Mapping[str, Any]]  # results before this session's first


@dataclass(frozen=True)
class _Rollback:
    to: int


@dataclass(frozen=True)
class _Config:
    config: Mapping[str, Any]


@dataclass(frozen=True)
class _End:
    status: str
    artifact_dir: str | None


class _Close:
    pass


class _Worker:
    """One worker thread's own state: a worker abandoned at close (stuck in a tracker
    call) never touches the runs of the one a later session starts."""

    __slots__ = ("stop", "done", "handles", "artifacts")

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.done = threading.Event()
        self.handles: dict[str, RunHandle] = {}
        #: (trial id, its finished run, its directory): stored when the experiment ends.
        self.artifacts: list[tuple[str, RunHandle, str]] = []


class _TrackerBook:
    """The hook side's view of a trial: the last iteration it queued, the config."""

    __slots__ = ("last", "config", "ended")

    def __init__(self, last: int, config: dict[str, Any]) -> None:
        self.last = last
        self.config = config
        self.ended = False


class TrackerHook:
    """A hook sending each trial's config and results to a tracker (see the module).

    ``run_name(trial)`` names a trial's run (default: the trial's id);
    ``artifact_dir(trial)`` is a directory stored with the run (None: nothing): when the
    trial ends, or, by a backend that can add files to a finished run (MLflow), when the
    experiment ends, so that the trial's logs in it are complete. ``excludes`` are
    result keys not to send.
    """

    inline_hooks = frozenset(
        {
            "on_trial_start",
            "on_trial_result",
            "on_trial_restore",
            "on_trial_error",
            "on_trial_complete",
        }
    )

    def __init__(
        self,
        backend: Backend,
        *,
        run_name: Callable[[Any], str] | None = None,
        artifact_dir: Callable[[Any], str | None] | None = None,
        excludes: Sequence[str] = (),
        max_pending: int = 10_000,
        close_grace: float = 10.0,
    ) -> None:
        if not max_pending >= 1 or not close_grace >= 0:
            raise ConfigError(
                f"a tracker hook needs max_pending >= 1 and close_grace >= 0; got "
                f"{max_pending!r}, {close_grace!r}"
            )
        self.backend = backend
        self._run_name = run_name
        self._artifact_dir = artifact_dir
        self._excludes = tuple(excludes)
        self._max_pending = int(max_pending)
        self._close_grace = float(close_grace)
        self._reset()

    def _reset(self) -> None:
        self._books: dict[str, _TrackerBook] = {}
        self._queue: collections.deque[tuple[str, Any]] = collections.deque()
        self._ready = threading.Condition()
        # Results queued (counted by the hooks' thread) and taken (by the worker): each
        # counter has one writer, so a result is queued without taking the lock.
        self._queued = self._taken = 0
        self._idle = False  # the worker waits for the queue (read without the lock)
        self._worker: _Worker | None = None
        self._warned_full = False
        self._results = self._dropped = 0
        # Written by the worker only.
        self._sent = self._replayed = self._failures = 0
        self._calls = 0  # backend calls returned: the progress closing waits on
        self._failed: set[str] = set()

    def __getstate__(self) -> dict[str, Any]:
        """What the hook is (the backend and options), never what it is doing: a Tune
        run pickles its callbacks for ``Tuner.restore``."""
        return {key: self.__dict__[key] for key in _OPTIONS}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset()

    # -- hooks: decide and queue, never block -----------------------------------------------

    def on_trial_start(self, trial: Any) -> None:
        book = self._books.get(trial.id)
        if book is None:
            latest = getattr(trial, "latest_checkpoint", None)
            bound = int(getattr(latest, "iteration", 0) or 0)
            self._first_sight(trial, [r for r in results_of(trial) if iteration_of(r) <= bound])
        else:
            book.ended = False
            self._check_config(trial, book)

    def on_trial_result(self, trial: Any, result: Mapping[str, Any]) -> None:
        book = self._books.get(trial.id)
        if book is None:
            book = self._first_sight(trial, history_before(trial, result))
        iteration = result.get(TRAINING_ITERATION)
        if type(iteration) is not int:
            iteration = book.last + 1
            result = {**result, TRAINING_ITERATION: iteration}
        if iteration <= book.last:
            self._push(trial.id, _Rollback(iteration - 1))
        self._check_config(trial, book)
        book.last, book.ended = iteration, False
        self._results += 1
        if self._queued - self._taken >= self._max_pending:
            self._drop(trial.id, iteration)
            return
        self._push(trial.id, result, result=True)

    def on_trial_restore(self, trial: Any, checkpoint: Any) -> None:
        iteration = int(getattr(checkpoint, "iteration", 0) or 0)
        book = self._books.get(trial.id)
        if book is None:
            self._first_sight(trial, [r for r in results_of(trial) if iteration_of(r) <= iteration])
            return
        if iteration < book.last:
            self._push(trial.id, _Rollback(iteration))
        book.last, book.ended = iteration, False
        self._check_config(trial, book)

    def on_trial_error(self, trial: Any, error: BaseException) -> None:
        if getattr(getattr(trial, "state", None), "value", None) == "ERROR":
            self.end_trial(trial, failed=True)

    def on_trial_complete(self, trial: Any) -> None:
        self.end_trial(trial, failed=False)

    async def on_experiment_end(self, trials: Sequence[Any]) -> None:
        await self.aclose()

    # -- closing ------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Finish every open run, off the loop; a tracker that completes no call for
        ``close_grace`` seconds is abandoned."""
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    def close(self) -> None:
        """:meth:`aclose` from a thread."""
        worker = self._worker
        if worker is None:
            return
        self._push("", _Close())
        seen = self._calls
        while not worker.done.wait(self._close_grace) and self._calls != seen:
            seen = self._calls  # it is slow, not stuck: wait while it gets on
        if not worker.done.is_set():
            with self._ready:
                worker.stop.set()  # it drops what it holds once its call returns
                self._ready.notify_all()
                left = self._queued - self._taken
                self._queue.clear()
                self._taken = self._queued
            log.warning(
                "%s made no progress for %g s at the experiment's end: abandoned it with "
                "%d result(s) not sent; its runs may stay open. The trials were not slowed.",
                self.backend.label,
                self._close_grace,
                left,
            )
        self._worker = None
        self._books.clear()

    def statistics(self) -> TrackerStatistics:
        return TrackerStatistics(
            results=self._results,
            sent=self._sent,
            replayed=self._replayed,
            dropped=self._dropped,
            pending=self._queued - self._taken,
            failures=self._failures,
        )

    # -- the hook side's decisions ------------------------------------------------------------

    def _first_sight(self, trial: Any, history: list[Mapping[str, Any]]) -> _TrackerBook:
        config = dict(getattr(trial, "config", None) or {})
        name = self._run_name(trial) if self._run_name is not None else str(trial.id)
        book = self._books[trial.id] = _TrackerBook(
            iteration_of(history[-1]) if history else 0, config
        )
        self._push(trial.id, _Open(TrialRun(str(trial.id), str(name), config), history))
        return book

    def _check_config(self, trial: Any, book: _TrackerBook) -> None:
        config = getattr(trial, "config", None) or {}
        try:
            same = bool(config == book.config)
        except Exception:  # a leaf whose == is not a bool (an array)
            same = repr(config) == repr(book.config)
        if not same:
            book.config = dict(config)
            self._push(trial.id, _Config(book.config))

    def end_trial(self, trial: Any, *, failed: bool) -> None:
        """The trial ended for good: its run is finished (``FAILED`` or ``FINISHED``)."""
        status = "FAILED" if failed else "FINISHED"
        book = self._books.get(trial.id)
        if book is None:
            book = self._first_sight(trial, results_of(trial))
        if book.ended:
            return
        book.ended = True
        directory = self._artifact_dir(trial) if self._artifact_dir is not None else None
        self._push(trial.id, _End(status, directory))

    def _drop(self, trial_id: str, iteration: int) -> None:
        self._dropped += 1
        if not self._warned_full:
            self._warned_full = True
            log.warning(
                "%s is not keeping up: %d results wait for it, so results are dropped from "
                "now on while it lags (first: trial %s, step %d); the trials go on unslowed. "
                "A tracker's runs then miss steps: check the tracker, or pass a larger "
                "max_pending",
                self.backend.label,
                self._max_pending,
                trial_id,
                iteration,
            )

    def _push(self, key: str, op: Any, *, result: bool = False) -> None:
        """Queue ``op``; the lock only to wake a waiting worker. No wake-up is lost: the
        worker says it is idle before it looks at the queue, and this looks whether it
        is idle after appending (one of the two sees the other)."""
        self._queue.append((key, op))
        if result:
            self._queued += 1
        if self._idle:
            with self._ready:
                self._ready.notify()
        if self._worker is None:
            self._start()

    def _start(self) -> None:
        worker = self._worker = _Worker()
        threading.Thread(
            target=self._work, args=(worker,), name=f"tracker:{self.backend.label}", daemon=True
        ).start()

    # -- the worker thread --------------------------------------------------------------------

    def _work(self, worker: _Worker) -> None:
        try:
            while not worker.stop.is_set():
                with self._ready:
                    self._idle = True
                    while not self._queue and not worker.stop.is_set():
                        self._ready.wait()
                    self._idle = False
                    if worker.stop.is_set():
                        return
                    batch = [self._queue.popleft() for _ in range(min(_BATCH, len(self._queue)))]
                if self._carry_out(worker, batch):
                    return
        finally:
            worker.done.set()

    def _carry_out(self, worker: _Worker, batch: list[tuple[str, Any]]) -> bool:
        rows: dict[str, list[Mapping[str, Any]]] = {}
        order: list[str] = []
        closing = False
        handles = worker.handles
        for key, op in batch:
            if worker.stop.is_set():
                return True
            if isinstance(op, Mapping):
                self._taken += 1
                if key not in rows:
                    rows[key] = []
                    order.append(key)
                rows[key].append(op)
                continue
            # Anything else comes after the results queued before it.
            self._flush_rows(handles, rows, order)
            if isinstance(op, _Close):
                closing = True
                self._finish_all(worker)
            else:
                self._guard(key, self._apply, worker, key, op)
        self._flush_rows(handles, rows, order)
        return closing

    def _flush_rows(
        self,
        handles: dict[str, RunHandle],
        rows: dict[str, list[Mapping[str, Any]]],
        order: list[str],
    ) -> None:
        for key in order:
            handle = handles.get(key)
            if handle is not None:
                self._guard(key, self._log, handle, rows[key])
        rows.clear()
        order.clear()

    def _apply(self, worker: _Worker, key: str, op: Any) -> None:
        handles = worker.handles
        if isinstance(op, _Open):
            if key in handles:
                return  # paused and resumed, restarted: the same run goes on
            opened = handles[key] = self.backend.open(op.trial)
            history_end = iteration_of(op.history[-1]) if op.history else 0
            self._log(opened, [r for r in op.history if iteration_of(r) > opened.step])
            if history_end < opened.step:  # a new driver went back further than the run
                opened.extra["rollback"] = history_end
            return
        handle = handles.get(key)
        if handle is None:
            return
        if isinstance(op, _Rollback):
            if op.to < handle.step:
                handle.extra["rollback"] = op.to
        elif isinstance(op, _Config):
            self.backend.set_config(handle, op.config)
        elif isinstance(op, _End):
            del handles[key]
            directory = op.artifact_dir
            if directory is not None and hasattr(self.backend, "log_artifacts"):
                worker.artifacts.append((key, handle, directory))
                directory = None
            self.backend.finish(handle, op.status, directory)

    def _log(self, handle: RunHandle, results: list[Mapping[str, Any]]) -> None:
        if not results:
            return
        out: list[tuple[int, dict[str, float]]] = []
        step = handle.step
        for result in results:
            iteration = iteration_of(result)
            if iteration <= step:
                self._replayed += 1
                continue
            metrics = metrics_of(result, self._excludes)
            mark = handle.extra.pop("rollback", None)
            if mark is not None:
                metrics[ROLLBACK_METRIC] = float(mark)
            out.append((iteration, metrics))
            step = iteration
        if out:
            self.backend.log(handle, out)
            handle.step = step
            self._sent += len(out)

    def _finish_all(self, worker: _Worker) -> None:
        for key, handle, directory in worker.artifacts:
            self._guard(key, self.backend.log_artifacts, handle, directory)  # type: ignore[attr-defined]
        worker.artifacts.clear()
        handles = worker.handles
        for key in list(handles):
            handle = handles.pop(key)
            self._guard(key, self.backend.finish, handle, "KILLED", None)
        self._guard("", self.backend.close)

    def _guard(self, key: str, fn: Callable[..., object], *args: Any) -> None:
        try:
            fn(*args)
            self._calls += 1
        except Exception as err:
            self._calls += 1
            self._failures += 1
            if key not in self._failed:
                self._failed.add(key)
                log.warning(
                    "%s failed for trial %s (%s: %s); its later calls go on, and failures "
                    "for this trial are not logged again",
                    self.backend.label,
                    key or "(all)",
                    type(err).__name__,
                    err,
                )
