"""The :class:`ExperimentLogger` hook: per-trial logs that always equal the trial's
history, at a per-result cost of one list append.

The hook methods only decide and queue (no I/O, no thread hand-off): a result is
appended to its trial's pending list, a restore or a repeated iteration becomes a
rollback, a config that differs from the one last written becomes a config change.
One flusher task, started by the first hook call, hands the pending operations to one
worker thread every ``flush_interval`` seconds (sooner when ``max_pending`` results are
waiting), then uploads the files that changed, at most every ``upload_interval``
seconds. ``on_experiment_end`` and :meth:`ExperimentLogger.aclose` flush, upload and
close everything, and leave no task behind.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.core.trial_history import history_before, iteration_of, results_of
from orchestrator.errors import ConfigError
from orchestrator.views.loggers.flusher import Flusher
from orchestrator.views.loggers.log_sink import LogSink
from orchestrator.views.loggers.ops import TRAINING_ITERATION, ConfigChange, End, Reset, Rollback
from orchestrator.views.loggers.values import dumps
from orchestrator.views.loggers.writers import DEFAULT_LOGGERS, check_logger_names

__all__ = ["ExperimentLogger", "LoggerStatistics"]

log = logging.getLogger("orchestrator.views.loggers")


@dataclass(frozen=True)
class LoggerStatistics:
    """Counters since the logger was made; ``failed_trials`` had a write fail."""

    results: int  # results received
    pending: int  # results queued, not yet written
    flushes: int
    uploads: int  # files uploaded
    write_failures: int
    failed_trials: frozenset[str]


class _LoggerBook:
    """What the hook side knows of a trial: what it has queued so far."""

    __slots__ = ("last", "last_result", "config", "ended")

    def __init__(self, config: dict[str, Any], history: Sequence[Mapping[str, Any]]) -> None:
        self.config = config
        self.last_result: Mapping[str, Any] | None = history[-1] if history else None
        self.last: int = iteration_of(self.last_result) if self.last_result else 0
        self.ended = False


class ExperimentLogger:
    """Writes ``<logdir>/<trial_id>/`` for every trial: ``params.json``,
    ``params_history.jsonl`` and ``result.json`` (``"json"``), ``progress.csv``
    (``"csv"``) and TensorBoard event files (``"tensorboard"``); ``loggers`` picks a
    subset. See the ``jsonfile``, ``csvfile`` and ``tensorboard`` modules for each
    format's conventions.

    History: results are the trial's history. A restore to iteration ``k``, or a result
    whose ``training_iteration`` is not after the last one (the run restarted; its
    history ends at that iteration - 1), removes the later results from every file.
    A trial first seen with results already recorded (a resumed experiment) has its
    files rewritten from those results (the resume first keeps aside a line log that
    holds more: :mod:`orchestrator.journal.trial_logs`).

    Results are queued by reference and written later: do not mutate a result after
    reporting it. A result without an int ``training_iteration`` is logged as a copy
    numbered after the previous one.

    With ``storage`` (an opened trialflow :class:`~storage.base.Storage`), ``logdir`` is
    the local copy and each changed file is uploaded whole to
    ``<trial_id>/<relative path>`` after a flush, at most every ``upload_interval``
    seconds and at the end; a failed upload is logged and retried at the next one.

    Nothing here raises into the hook runner: write and upload failures are logged
    (``orchestrator.views.loggers``), once per trial, and the other trials go on.
    """

    def __init__(
        self,
        logdir: str | os.PathLike[str],
        *,
        storage: Any = None,
        upload_interval: float = 5.0,
        loggers: Iterable[str] = DEFAULT_LOGGERS,
        flush_interval: float = 1.0,
        max_pending: int = 100_000,
    ) -> None:
        if not flush_interval > 0 or not upload_interval >= 0 or not max_pending >= 1:
            raise ConfigError(
                "ExperimentLogger needs flush_interval > 0, upload_interval >= 0 and "
                f"max_pending >= 1; got {flush_interval!r}, {upload_interval!r}, "
                f"{max_pending!r}"
            )
        self.logdir = Path(logdir)
        self.loggers = check_logger_names(loggers)
        self._sink = LogSink(self.logdir, self.loggers)
        self._flusher = Flusher(
            self._sink,
            storage=storage,
            flush_interval=float(flush_interval),
            upload_interval=float(upload_interval),
            max_pending=int(max_pending),
        )
        self._books: dict[str, _LoggerBook] = {}
        self._results = 0

    # -- hooks: bookkeeping only ------------------------------------------------------

    #: These only queue (no I/O): called inline by the hook runner, at once and in order.
    inline_hooks = frozenset(
        {
            "on_trial_start",
            "on_trial_result",
            "on_trial_restore",
            "on_trial_error",
            "on_trial_complete",
        }
    )

    async def on_trial_start(self, trial: Any) -> None:
        latest = getattr(trial, "latest_checkpoint", None)
        bound = int(getattr(latest, "iteration", 0) or 0)
        self._guard(self._touch, trial, lambda r: iteration_of(r) <= bound)

    async def on_trial_result(self, trial: Any, result: Mapping[str, Any]) -> None:
        try:
            book = self._books.get(trial.id)
            if book is None:
                book = self._first_sight(trial, history_before(trial, result))
            iteration = result.get(TRAINING_ITERATION)
            if type(iteration) is not int:
                iteration = book.last + 1
                result = {**result, TRAINING_ITERATION: iteration}
            if iteration <= book.last:
                self._rollback(trial, book, iteration - 1)
            self._check_config(trial, book)
            self._flusher.push(trial.id, result, result=True)
            book.last, book.last_result, book.ended = iteration, result, False
            self._results += 1
        except Exception:
            log.exception("the experiment logger's bookkeeping failed for %r", trial)

    async def on_trial_restore(self, trial: Any, checkpoint: Any) -> None:
        self._guard(self._restore, trial, checkpoint)

    async def on_trial_error(self, trial: Any, error: BaseException) -> None:
        self._guard(self._end, trial)

    async def on_trial_complete(self, trial: Any) -> None:
        self._guard(self._end, trial)

    async def on_experiment_end(self, trials: Sequence[Any]) -> None:
        for trial in trials:
            book = self._books.get(trial.id)
            if book is None or not book.ended:
                self._guard(self._end, trial)
        await self.aclose()

    # -- flushing ---------------------------------------------------------------------

    async def flush(self) -> None:
        """Write everything queued so far and upload every changed file now."""
        await self._flusher.flush()

    async def aclose(self) -> None:
        """Flush, upload and close every file, and stop the flusher. Idempotent; a
        later hook call starts over (files reopen, appending). Cancelling it loses
        nothing: what was not written yet stays queued for the next flush."""
        await self._flusher.aclose()

    def write_only_while(self, may_write: Callable[[], bool]) -> None:
        """Write and upload only while ``may_write()`` (the driver holds the experiment's
        lease): a driver that lost it must not splice rows into another one's logs."""
        self._flusher.may_write = may_write

    def statistics(self) -> LoggerStatistics:
        return LoggerStatistics(
            results=self._results,
            pending=self._flusher.pending_results,
            flushes=self._flusher.flushes,
            uploads=self._flusher.uploads,
            write_failures=self._sink.failures,
            failed_trials=self._sink.failed_trials,
        )

    # -- the hook side's decisions ----------------------------------------------------

    def _guard(self, fn: Callable[..., object], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("the experiment logger's bookkeeping failed for %r", args[0])

    def _touch(self, trial: Any, seed: Callable[[Mapping[str, Any]], bool]) -> _LoggerBook:
        book = self._books.get(trial.id)
        if book is None:
            return self._first_sight(trial, [r for r in results_of(trial) if seed(r)])
        book.ended = False
        self._check_config(trial, book)
        return book

    def _first_sight(self, trial: Any, history: list[Mapping[str, Any]]) -> _LoggerBook:
        book = self._books[trial.id] = _LoggerBook(_snapshot(trial), history)
        self._flusher.push(trial.id, Reset(book.config, history))
        return book

    def _rollback(self, trial: Any, book: _LoggerBook, iteration: int) -> None:
        self._flusher.push(trial.id, Rollback(iteration))
        book.last = iteration
        book.last_result = next(
            (r for r in reversed(results_of(trial)) if iteration_of(r) <= iteration), None
        )

    def _check_config(self, trial: Any, book: _LoggerBook) -> None:
        if not _same(getattr(trial, "config", None) or {}, book.config):
            book.config = _snapshot(trial)
            self._flusher.push(trial.id, ConfigChange(book.last, book.config))

    def _restore(self, trial: Any, checkpoint: Any) -> None:
        iteration = int(checkpoint.iteration)
        book = self._books.get(trial.id)
        if book is None:
            book = self._first_sight(
                trial, [r for r in results_of(trial) if iteration_of(r) <= iteration]
            )
        elif iteration < book.last:
            self._rollback(trial, book, iteration)
        book.last, book.ended = iteration, False
        self._check_config(trial, book)

    def _end(self, trial: Any) -> None:
        book = self._touch(trial, lambda r: True)
        self._flusher.push(trial.id, End(book.config, book.last_result))
        book.ended = True


def _snapshot(trial: Any) -> dict[str, Any]:
    """A copy of the trial's config whose dicts and lists are new and whose leaves are
    shared: an in-place change of the config is seen, and ``==`` with the live config
    stays cheap and true for leaves that compare by identity only (objects, arrays)."""
    config = getattr(trial, "config", None) or {}
    return {key: _copy_containers(value, 1) for key, value in config.items()}


def _copy_containers(value: Any, depth: int) -> Any:
    if depth > 32:
        return value
    if isinstance(value, dict):
        return {k: _copy_containers(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_containers(v, depth + 1) for v in value]
    return value


def _same(current: Mapping[str, Any], written: Mapping[str, Any]) -> bool:
    try:
        return bool(current == written)  # identical leaves compare equal without __eq__
    except Exception:  # a leaf whose == is not a bool: a new numpy array
        return dumps(current) == dumps(written)
