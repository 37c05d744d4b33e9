"""The ``tensorboard`` logger: TensorBoard event files, as tensorboardX writes them.

Conventions callers may rely on:

* one scalar per numeric result value (int or float, numpy's too, finite or not; not
  bool), tagged with its flattened key (``loss``, ``eval/acc``: no ``ray/tune/``
  prefix, the same names as the CSV columns), at ``step = training_iteration``; the
  ``training_iteration`` key itself is the step and is not logged. All scalars of one
  result go in one event, whose wall time is the result's ``timestamp`` when it has a
  numeric one, else the time it was written (within ``flush_interval`` of the result).
* when the trial ends, its config as hparams (flattened, values coerced to bool, int,
  float or str) whose metrics are the numeric keys of the last result, written into
  the trial's own run, where those metrics' scalars are (as Ray Tune does).
* a rollback to iteration ``k`` closes the event file and opens a new one that starts
  with the purge records ``SummaryWriter(purge_step=k + 1)`` writes (a ``SessionLog``
  START at step ``k + 1``): TensorBoard and ``EventAccumulator`` then hide the points
  at steps after ``k`` written before it. A fresh start (a trial first seen with old
  event files in its directory, e.g. a resumed experiment) purges from step 0.

The records are encoded by :mod:`orchestrator.views.loggers.tfevents` (tensorboardX's
package imports torch when installed: seconds of the driver's CPU for nothing used).
Events are written synchronously in the flusher's one thread, framed as TFRecords the
way tensorboardX's ``RecordWriter`` (the record layer under ``SummaryWriter``) frames
them: ``SummaryWriter`` runs a thread and a multiprocessing queue per writer, and its
``flush()`` does not drain that queue, so a flushed file could not be uploaded whole.
Measured: about 2 us per scalar this way, 30 us through ``SummaryWriter.add_scalar``.
A flush hands the file to the operating system without ``fsync``, as the JSON and CSV
logs do: ``RecordWriter`` fsyncs every flush and close, two or more disk syncs per
trial (2-16 ms each on this project's VM), which a sweep of short trials paid hundreds
of times for files that are a view of results the journal already holds.
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.views.loggers import tfevents
from orchestrator.views.loggers.ops import TRAINING_ITERATION
from orchestrator.views.loggers.values import flatten, hparam_value, scalar_value

__all__ = ["TensorBoardWriter", "EVENT_FILE_MARK"]

EVENT_FILE_MARK = ".out.tfevents."
_SEQUENCE = itertools.count()  # orders a trial's event files written in the same second


class TensorBoardWriter:
    """Writes a trial's event files (see the module docstring)."""

    def __init__(self, directory: Path, touched: Callable[[str], None]) -> None:
        self._dir = directory
        self._touched = touched
        self._writer: Any = None
        self._name = ""
        self._max_step: int | None = None
        self._purge: int | None = None

    def reset(self, config: Mapping[str, Any]) -> None:
        self.close()
        self._max_step = None
        old = any(EVENT_FILE_MARK in name for name in os.listdir(self._dir))
        self._purge = 0 if old else None

    def reopen(self) -> None:
        """Carry on in a new event file (a trial forgotten when it ended came back).
        Which steps the old files hold is not known: any rollback purges."""
        self.close()
        self._max_step = sys.maxsize

    def write(self, results: Sequence[Mapping[str, Any]]) -> None:
        writer = self._open()
        for result in results:
            step = int(result[TRAINING_ITERATION])
            values = {}
            for tag, value in flatten(result).items():
                number = scalar_value(value)
                if number is not None and tag != TRAINING_ITERATION:
                    values[tag] = number
            if values:
                stamp = scalar_value(result.get("timestamp"))
                wall = stamp if stamp is not None else time.time()
                summary = tfevents.scalars_summary(values)
                writer.write_event(tfevents.event(wall, step=step, summary=summary))
            if self._max_step is None or step > self._max_step:
                self._max_step = step
        self._touched(self._name)

    def rollback(self, iteration: int) -> None:
        if self._max_step is None or self._max_step <= iteration:
            return
        self.close()
        purge = iteration + 1
        self._purge = purge if self._purge is None else min(self._purge, purge)
        self._max_step = iteration

    def config_changed(self, iteration: int, config: Mapping[str, Any]) -> None:
        pass  # the config goes in as hparams at the end

    def end(self, config: Mapping[str, Any], last_result: Mapping[str, Any] | None) -> None:
        params = {key: hparam_value(v) for key, v in flatten(config).items()}
        metrics: dict[str, float] = {}
        for key, value in flatten(last_result or {}).items():
            number = scalar_value(value)
            if number is not None and key != TRAINING_ITERATION:
                metrics[key] = number
        writer = self._open()
        for summary in tfevents.hparams_summaries(params, metrics):
            writer.write_event(tfevents.event(time.time(), summary=summary))
        self._touched(self._name)
        self.close()

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _open(self) -> Any:
        if self._writer is not None:
            return self._writer
        now = time.time()
        suffix = f".{os.getpid()}.{next(_SEQUENCE):09d}"
        self._name = f"events{EVENT_FILE_MARK}{int(now):010d}.{socket.gethostname()}{suffix}"
        writer = _EventFile(self._dir / self._name)
        version = "brain.Event:2"
        writer.write_event(tfevents.event(now, file_version=version))  # as tensorboardX
        if self._purge is not None:
            writer.write_event(tfevents.event(now, step=self._purge, file_version=version))
            start = tfevents.session_start()
            writer.write_event(tfevents.event(now, step=self._purge, session_log=start))
            self._purge = None
        self._writer = writer
        self._touched(self._name)
        return writer


class _EventFile:
    """One event file: each event as a TFRecord (its length, the length's masked
    CRC-32C, the event, the event's masked CRC-32C), as tensorboardX writes them;
    ``flush`` without ``fsync`` (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self._crc = tfevents.masked_crc32c
        self._file = open(path, "wb")  # closed by close()

    def write_event(self, data: bytes) -> None:
        header = struct.pack("Q", len(data))
        crc = self._crc
        self._file.write(
            header + struct.pack("I", crc(header)) + data + struct.pack("I", crc(data))
        )

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()
