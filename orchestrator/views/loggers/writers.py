"""The per-trial writers behind each logger name, and the interface they share.

A writer owns some files in one trial's directory and is driven only by
:class:`~orchestrator.views.loggers.sink.LogSink`, in the flusher's one thread, with the
operations of :mod:`~orchestrator.views.loggers.ops` in the trial's order. It reports every
file it changed through ``touched(name)`` (a name relative to the trial's directory),
which is how uploads know what to send.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from orchestrator.errors import ConfigError
from orchestrator.views.loggers.csvfile import PROGRESS_FILE, CsvWriter
from orchestrator.views.loggers.jsonfile import PARAMS_HISTORY_FILE, RESULT_FILE, JsonWriter
from orchestrator.views.loggers.tensorboard import TensorBoardWriter

__all__ = [
    "DEFAULT_LOGGERS",
    "WRITERS",
    "TrialWriter",
    "WriterFactory",
    "check_logger_names",
    "line_logs",
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

WRITERS: dict[str, WriterFactory] = {
    "json": JsonWriter,
    "csv": CsvWriter,
    "tensorboard": TensorBoardWriter,
}

DEFAULT_LOGGERS = ("json", "csv", "tensorboard")

_NEEDS = {"tensorboard": "tensorboardX"}

#: The line logs each logger rewrites for a resumed trial.
_LINE_LOGS = {"json": (RESULT_FILE, PARAMS_HISTORY_FILE), "csv": (PROGRESS_FILE,)}


def line_logs(names: Iterable[str]) -> tuple[str, ...]:
    """The line logs (``result.json``, ``params_history.jsonl``, ``progress.csv``) the
    loggers ``names`` rewrite for a resumed trial: a resume keeps one aside first when it
    holds more. (TensorBoard's event files are never shortened: a resumed writer starts a
    new one.)"""
    return tuple(f for n in names for f in _LINE_LOGS.get(n, ()))


def check_logger_names(names: Iterable[str]) -> tuple[str, ...]:
    """The names, deduplicated in order; ``ConfigError`` for an unknown one or one whose
    library is missing."""
    if isinstance(names, str):
        names = (names,)
    chosen = tuple(dict.fromkeys(names))
    for name in chosen:
        if name not in WRITERS:
            raise ConfigError(
                f"unknown logger {name!r}; the loggers are {', '.join(map(repr, WRITERS))}"
            )
        module = _NEEDS.get(name)
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
