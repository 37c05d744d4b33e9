"""The writing side: applies batches of per-trial operations to the trials' writers.

Every method here blocks and is called from the flusher's one worker thread, never
from the event loop and never from two threads at once. A failure is contained: the
writer that raised skips the rest of that trial's batch, the trial's other writers and
the other trials go on, and each trial's first failure is logged (later ones only
counted), since a full disk would otherwise log once per result.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.core.trial_logs import trial_dirname
from orchestrator.views.loggers.ops import MARKERS, ConfigChange, End, Op, Reset, Rollback
from orchestrator.views.loggers.writers import WRITERS, TrialWriter

__all__ = ["LogSink", "trial_dirname"]

log = logging.getLogger("orchestrator.views.loggers")

Segment = Reset | Rollback | ConfigChange | End | list[Mapping[str, Any]]


def _segments(ops: Sequence[Op]) -> Iterator[Segment]:
    """Runs of consecutive results become one list, so each is written in one go."""
    run: list[Mapping[str, Any]] = []
    for op in ops:
        if isinstance(op, MARKERS):
            if run:
                yield run
                run = []
            yield op
        else:
            run.append(op)
    if run:
        yield run


class _TrialLog:
    def __init__(
        self,
        trial_id: str,
        directory: Path,
        names: Sequence[str],
        changed: Callable[[_TrialLog, str], None],
    ) -> None:
        self.trial_id = trial_id
        self.directory = directory
        self.writers: dict[str, TrialWriter] = {
            name: WRITERS[name](directory, functools.partial(changed, self)) for name in names
        }

    def reopen(self) -> list[BaseException]:
        errors: list[BaseException] = []
        for writer in self.writers.values():
            try:
                writer.reopen()
            except Exception as err:
                errors.append(err)
        return errors

    def apply(self, segments: Sequence[Segment]) -> list[BaseException]:
        errors: list[BaseException] = []
        if any(isinstance(s, Reset) for s in segments):
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except Exception as err:
                return [err]
        for writer in self.writers.values():
            try:
                for segment in segments:
                    _apply(writer, segment)
                writer.flush()
            except Exception as err:
                errors.append(err)
        return errors

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()


def _apply(writer: TrialWriter, segment: Segment) -> None:
    if isinstance(segment, list):
        writer.write(segment)
    elif isinstance(segment, Reset):
        writer.reset(segment.config)
        if segment.history:
            writer.write(segment.history)
    elif isinstance(segment, Rollback):
        writer.rollback(segment.iteration)
    elif isinstance(segment, ConfigChange):
        writer.config_changed(segment.iteration, segment.config)
    else:
        writer.end(segment.config, segment.last_result)


class LogSink:
    """All trials' files under ``logdir/<trial_dirname(trial_id)>/``.

    A trial whose operations end with its end (:class:`~.ops.End`) is closed and
    forgotten: a sweep's ten thousand finished trials keep no writers, file indexes or
    column sets in the driver (issue 36). If it comes back (a restore), its writers are
    made again and pick up its files as they are on disk (``TrialWriter.reopen``)."""

    def __init__(self, logdir: Path, names: Sequence[str]) -> None:
        self.logdir = logdir
        self.names = tuple(names)
        self._trials: dict[str, _TrialLog] = {}
        self._failed: set[str] = set()
        self.failures = 0
        # The files changed since the last take_changed, by trial: only the trials
        # that changed, and nothing at all when nobody uploads (issue 36: a finished
        # trial leaves no set behind, and a listing costs what changed).
        self.track_changes = True
        self._changed: dict[Path, set[str]] = {}  # by trial directory

    @property
    def failed_trials(self) -> frozenset[str]:
        return frozenset(self._failed)

    def apply(self, batch: Mapping[str, Sequence[Op]], *, close: bool = False) -> None:
        """Carry out each trial's operations in order; with ``close``, close every
        file afterwards (they reopen if more operations come)."""
        for trial_id, ops in batch.items():
            if not ops:
                continue
            trial = self._trials.get(trial_id)
            if trial is None:
                directory = self.logdir / trial_dirname(trial_id)
                trial = self._trials[trial_id] = _TrialLog(
                    trial_id, directory, self.names, self._note_changed
                )
                if not isinstance(ops[0], Reset):
                    # A trial's first operation is its Reset (the hook's first sight of
                    # it): one that starts otherwise ended and was forgotten.
                    for err in trial.reopen():
                        self._fail(trial_id, err)
            for err in trial.apply(list(_segments(ops))):
                self._fail(trial_id, err)
            if isinstance(ops[-1], End):
                self._forget(trial_id, trial)
        if close:
            self.close()

    def take_changed(self) -> list[tuple[str, Path]]:
        """``(key, path)`` of every file changed since the last call, and forget them;
        ``key`` is ``<trial dir>/<relative path>``."""
        changed: list[tuple[str, Path]] = []
        for directory, names in self._changed.items():
            prefix = directory.name
            changed.extend((f"{prefix}/{name}", directory / name) for name in names)
        self._changed = {}
        return sorted(changed)

    def _note_changed(self, trial: _TrialLog, name: str) -> None:
        if self.track_changes:
            self._changed.setdefault(trial.directory, set()).add(name)

    def mark_changed(self, key: str) -> None:
        """Upload ``key`` again next time (its upload failed)."""
        prefix, _, name = key.partition("/")
        if self.track_changes and prefix and name:
            self._changed.setdefault(self.logdir / prefix, set()).add(name)

    def _forget(self, trial_id: str, trial: _TrialLog) -> None:
        """Close an ended trial's files and drop its writers (see the class docstring)."""
        del self._trials[trial_id]
        try:
            trial.close()
        except Exception as err:
            self._fail(trial_id, err)

    def close(self) -> None:
        for trial_id, trial in self._trials.items():
            try:
                trial.close()
            except Exception as err:
                self._fail(trial_id, err)

    def _fail(self, trial_id: str, err: BaseException) -> None:
        self.failures += 1
        if trial_id in self._failed:
            return
        self._failed.add(trial_id)
        log.error(
            "could not write the logs of trial %s in %s (%s: %s); the other trials' logs "
            "go on, and later failures of this trial are not logged again",
            trial_id,
            self.logdir / trial_dirname(trial_id),
            type(err).__name__,
            err,
            exc_info=err,
        )
