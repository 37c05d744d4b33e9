"""The registry of loggers: every registered logger's writer does what the others do
(starts, appends, rolls back, ends, and says which files it changed), the Tune facade's
callbacks name registered loggers, and a logger registered once is a name
``ExperimentLogger`` takes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import orchestrator.tune.logger as tune_logger
from orchestrator.views.loggers import (
    LOGGERS,
    WRITERS,
    ExperimentLogger,
    LoggerKind,
    register_logger,
)

from ..support.logger_fakes import FakeTrial


@pytest.mark.parametrize("kind", list(LOGGERS.values()), ids=lambda kind: kind.name)
def test_every_logger_writes_rolls_back_and_says_what_it_changed(
    kind: LoggerKind, tmp_path: Path
) -> None:
    if kind.needs:
        pytest.importorskip(kind.needs)
    touched: list[str] = []
    writer = kind.writer(tmp_path, touched.append)
    writer.reset({"lr": 0.1})
    writer.write([{"training_iteration": i, "loss": 1.0 / i} for i in (1, 2, 3)])
    writer.rollback(1)
    writer.config_changed(1, {"lr": 0.2})
    writer.write([{"training_iteration": 2, "loss": 0.4}])
    writer.end({"lr": 0.2}, {"training_iteration": 2, "loss": 0.4})
    writer.flush()
    writer.close()
    assert touched, f"logger {kind.name!r} reported no file it changed"
    for name in touched:
        assert (tmp_path / name).is_file(), (kind.name, name)
    assert set(kind.line_logs) <= set(touched), "a line log it never writes"


def test_the_tune_facade_names_registered_loggers() -> None:
    for kind in LOGGERS.values():
        if kind.tune_class is not None:
            assert kind.tune_class in tune_logger.__all__
            assert getattr(tune_logger, kind.tune_class).kind == kind.name
    for name in tune_logger.__all__:
        own = getattr(getattr(tune_logger, name), "kind", "")
        assert not own or own in LOGGERS, (name, own)


class LinesWriter:
    """A toy logger: one ``lines.txt`` of ``iteration loss`` lines."""

    def __init__(self, directory: Path, touched: Any) -> None:
        self.path, self.touched, self.rows = directory / "lines.txt", touched, []

    def reset(self, config: Mapping[str, Any]) -> None:
        self.rows = []

    def write(self, results: Sequence[Mapping[str, Any]]) -> None:
        self.rows += [f"{r['training_iteration']} {r.get('loss')}" for r in results]

    def rollback(self, iteration: int) -> None:
        self.rows = [r for r in self.rows if int(r.split()[0]) <= iteration]

    def config_changed(self, iteration: int, config: Mapping[str, Any]) -> None:
        return None

    def end(self, config: Mapping[str, Any], last_result: Mapping[str, Any] | None) -> None:
        self.flush()

    def flush(self) -> None:
        self.path.write_text("".join(f"{row}\n" for row in self.rows))
        self.touched(self.path.name)

    def close(self) -> None:
        self.flush()


@pytest.fixture
def lines_logger() -> Iterator[None]:
    register_logger(LoggerKind("lines", LinesWriter, line_logs=("lines.txt",)))
    yield
    del LOGGERS["lines"], WRITERS["lines"]


@pytest.mark.usefixtures("lines_logger")
async def test_a_logger_registered_once_is_a_name_the_loggers_take(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, loggers=["lines"], flush_interval=60)
    trial = FakeTrial("t1")
    await logger.on_trial_start(trial)
    for i in (1, 2, 3):
        await logger.on_trial_result(trial, trial.report(i, loss=float(i)))
    await logger.on_trial_complete(trial)
    await logger.aclose()
    assert (tmp_path / "t1" / "lines.txt").read_text() == "1 1.0\n2 2.0\n3 3.0\n"
    assert not (tmp_path / "t1" / "result.json").exists()  # only the loggers asked for
