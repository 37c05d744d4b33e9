"""The per-trial writers behind each logger name, and the interface they share.

A writer owns some files in one trial's directory and is driven only by
:class:`~orchestrator.views.loggers.log_sink.LogSink`, in the flusher's one thread, with the
operations of :mod:`~orchestrator.views.loggers.ops` in the trial's order. It reports every
file it changed through ``touched(name)`` (a name relative to the trial's directory),
which is how uploads know what to send.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from orchestrator.errors import ConfigError
from orchestrator.views.loggers.csvfile import PROGRESS_FILE, CsvWriter
from orchestrator.views.loggers.jsonfile import PARAMS_HISTORY_FILE, RESULT_FILE, JsonWriter
from orchestrator.views.loggers.tensorboard import TensorBoardWriter

__all__ = [
    "DEFAULT_LOGGERS",
    "LOGGERS",
    "WRITERS",
    "LoggerKind",
    "TrialWriter",
    "WriterFactory",
    "check_logger_names",
    "line_logs",
    "register_logger",
    "split_loggers",
]


class TrialWriter(Protocol):
    def reset(self, config: Mapping[str, Any]) -> None:
        """Start the files afresh (the directory exists)."""

    def reopen(self) -> None:
        """Carry on with the files as they are on disk: the sink forgot the trial when
        it ended (issue 36: a finished trial keeps no writer in the driver) and it came
        back. Later operations act as if the writer had never been dropped."""

    def write(self, results: Sequence[Mapping[str, Any]]) -> None:
        """Append results, in order; each has an int ``training_iteration``."""

    def rollback(self, iteration: int) -> None:
        """Remove every result after ``iteration``."""

    def config_changed(self, iteration: int, config: Mapping[str, Any]) -> None: ...

    def end(self, config: Mapping[str, Any], last_result: Mapping[str, Any] | None) -> None:
        """Write the end-of-trial summary and close the files (they reopen if needed)."""

    def flush(self) -> None: ...

    def close(self) -> None: ...


WriterFactory = Callable[[Path, Callable[[str], None]], TrialWriter]


@dataclass(frozen=True)
class LoggerKind:
    """One logger name (``Orchestrator(loggers=[name])``) and what stands behind it.

    ``writer`` builds the trial's :class:`TrialWriter` from its directory and the
    ``touched`` callback; ``needs`` is a module it imports (a missing one is said when
    the name is chosen, not at the first result); ``line_logs`` are the files it
    rewrites for a resumed trial (kept aside first when they hold more);
    ``tune_class`` is the name of Ray Tune's callback for it in
    :mod:`orchestrator.tune.logger`, if Tune has one."""

    name: str
    writer: WriterFactory
    needs: str | None = None
    line_logs: tuple[str, ...] = ()
    tune_class: str | None = None


_BUILT_IN = (
    LoggerKind(
        "json",
        JsonWriter,
        line_logs=(RESULT_FILE, PARAMS_HISTORY_FILE),
        tune_class="JsonLoggerCallback",
    ),
    LoggerKind("csv", CsvWriter, line_logs=(PROGRESS_FILE,), tune_class="CSVLoggerCallback"),
    LoggerKind("tensorboard", TensorBoardWriter, tune_class="TBXLoggerCallback"),
)

#: Every logger by name: the registry (:func:`register_logger` adds to it).
LOGGERS: dict[str, LoggerKind] = {kind.name: kind for kind in _BUILT_IN}

#: The writer behind each logger name (a view of :data:`LOGGERS`, kept for its users).
WRITERS: dict[str, WriterFactory] = {kind.name: kind.writer for kind in _BUILT_IN}

#: The loggers on when ``Orchestrator(loggers=None)``: the built-in ones.
DEFAULT_LOGGERS = tuple(kind.name for kind in _BUILT_IN)


def register_logger(kind: LoggerKind) -> None:
    """Offer ``kind.name`` as a logger name (replacing a registered one of that name)."""
    LOGGERS[kind.name] = kind
    WRITERS[kind.name] = kind.writer


def line_logs(names: Iterable[str]) -> tuple[str, ...]:
    """The line logs (``result.json``, ``params_history.jsonl``, ``progress.csv``) the
    loggers ``names`` rewrite for a resumed trial: a resume keeps one aside first when it
    holds more. (TensorBoard's event files are never shortened: a resumed writer starts a
    new one.)"""
    return tuple(f for n in names if n in LOGGERS for f in LOGGERS[n].line_logs)


def check_logger_names(names: Iterable[str]) -> tuple[str, ...]:
    """The names, deduplicated in order; ``ConfigError`` for an unknown one or one whose
    library is missing."""
    if isinstance(names, str):
        names = (names,)
    chosen = tuple(dict.fromkeys(names))
    for name in chosen:
        if name not in LOGGERS:
            raise ConfigError(
                f"unknown logger {name!r}; the loggers are {', '.join(map(repr, LOGGERS))}"
            )
        module = LOGGERS[name].needs
        if module is not None and importlib.util.find_spec(module) is None:
            others = tuple(n for n in chosen if n != name)
            raise ConfigError(
                f"the {name!r} logger needs {module}: pip install {module}, or pass "
                f"loggers={others!r}"
            )
    return chosen


def split_loggers(loggers: Iterable[Any] | None) -> tuple[tuple[str, ...], list[Any]]:
    """``Orchestrator(loggers=...)`` split into built-in logger names (``None``: all
    three) and users' own logger objects (hooks)."""
    if loggers is None:
        return tuple(DEFAULT_LOGGERS), []
    if isinstance(loggers, str):
        raise ConfigError(f"loggers must be a list, e.g. [{loggers!r}], got {loggers!r}")
    items = list(loggers)
    names = check_logger_names([x for x in items if isinstance(x, str)])
    return names, [x for x in items if not isinstance(x, str)]
