"""After a rollback the logs equal the trial's history: in result.json, in progress.csv
and in what TensorBoard's reader shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.views.loggers import ExperimentLogger

from ..support.logger_fakes import (
    FakeCheckpoint,
    FakeTrial,
    event_files,
    read_progress,
    read_results,
    scalars,
)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def history(trial: FakeTrial, key: str = "loss") -> list[tuple[int, float]]:
    return [(r["training_iteration"], r[key]) for r in trial.results]


def assert_logs_equal_history(trial_dir: Path, trial: FakeTrial) -> None:
    expected = history(trial)
    results = read_results(trial_dir)
    assert list(zip(results["training_iteration"], results["loss"], strict=True)) == expected
    progress = read_progress(trial_dir)
    assert list(zip(progress["training_iteration"], progress["loss"], strict=True)) == expected
    assert scalars(trial_dir, "loss") == expected  # values exact in float32


async def report(logger: ExperimentLogger, trial: FakeTrial, its: range, base: float) -> None:
    for i in its:
        await logger.on_trial_result(trial, trial.report(i, loss=base + i))


async def test_a_restore_removes_the_later_results_everywhere(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, flush_interval=60)
    trial = FakeTrial("t1")
    await logger.on_trial_start(trial)
    await report(logger, trial, range(1, 11), base=0.0)
    await logger.flush()  # the abandoned run's results are on disk
    trial.rollback(5)
    await logger.on_trial_restore(trial, FakeCheckpoint(iteration=5))
    await report(logger, trial, range(6, 9), base=100.0)
    await logger.on_trial_complete(trial)
    await logger.aclose()

    assert [i for i, _ in history(trial)] == list(range(1, 9))
    assert_logs_equal_history(tmp_path / "t1", trial)
    assert len(event_files(tmp_path / "t1")) == 2  # the old points are purged, not lost
    # The abandoned run's result lines are kept beside result.json, as they were.
    abandoned = read_jsonl(tmp_path / "t1" / "result.abandoned.json")
    assert [(r["training_iteration"], r["loss"]) for r in abandoned] == [
        (i, float(i)) for i in range(6, 11)
    ]


async def test_a_repeated_iteration_means_the_run_restarted(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, flush_interval=60)
    trial = FakeTrial("t1")
    await report(logger, trial, range(1, 7), base=0.0)
    await logger.flush()
    # No restore hook (the trainable restarted on its own): iteration 4 comes again.
    await report(logger, trial, range(4, 6), base=50.0)
    await logger.aclose()

    assert history(trial) == [(1, 1.0), (2, 2.0), (3, 3.0), (4, 54.0), (5, 55.0)]
    assert_logs_equal_history(tmp_path / "t1", trial)


async def test_rollbacks_within_one_batch_and_in_a_row(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, flush_interval=60)
    trial = FakeTrial("t1")
    await report(logger, trial, range(1, 9), base=0.0)
    trial.rollback(6)
    await logger.on_trial_restore(trial, FakeCheckpoint(iteration=6))
    await report(logger, trial, range(7, 8), base=10.0)
    trial.rollback(3)
    await logger.on_trial_restore(trial, FakeCheckpoint(iteration=3))  # same batch
    await report(logger, trial, range(4, 6), base=20.0)
    await logger.flush()
    assert_logs_equal_history(tmp_path / "t1", trial)
    trial.rollback(2)
    await logger.on_trial_restore(trial, FakeCheckpoint(iteration=2))
    trial.rollback(1)
    await logger.on_trial_restore(trial, FakeCheckpoint(iteration=1))  # nothing written between
    await report(logger, trial, range(2, 4), base=30.0)
    await logger.aclose()

    assert history(trial) == [(1, 1.0), (2, 32.0), (3, 33.0)]
    assert_logs_equal_history(tmp_path / "t1", trial)


async def test_a_rollback_to_before_a_widening_keeps_the_wider_header(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, loggers=("csv",), flush_interval=60)
    trial = FakeTrial("t1")
    await report(logger, trial, range(1, 4), base=0.0)
    await logger.flush()
    await logger.on_trial_result(trial, trial.report(4, loss=4.0, extra=1))
    await logger.flush()
    trial.rollback(2)
    await logger.on_trial_restore(trial, FakeCheckpoint(iteration=2))
    await report(logger, trial, range(3, 5), base=10.0)
    await logger.aclose()

    progress = read_progress(tmp_path / "t1")
    assert progress["training_iteration"].tolist() == [1, 2, 3, 4]
    assert progress["loss"].tolist() == [1.0, 2.0, 13.0, 14.0]
    assert progress["extra"].isna().all()  # its only row is gone, its column is not


async def test_a_restore_forward_to_a_donors_iteration_drops_nothing(tmp_path: Path) -> None:
    logger = ExperimentLogger(tmp_path, flush_interval=60)
    trial = FakeTrial("t1")
    await report(logger, trial, range(1, 4), base=0.0)
    await logger.on_trial_restore(trial, FakeCheckpoint(iteration=7))  # a PBT donor's
    await report(logger, trial, range(8, 10), base=0.0)
    await logger.aclose()

    assert [i for i, _ in history(trial)] == [1, 2, 3, 8, 9]
    assert_logs_equal_history(tmp_path / "t1", trial)
    assert len(event_files(tmp_path / "t1")) == 1


async def test_an_ended_trial_is_forgotten_and_restored_later_its_logs_carry_on(
    tmp_path: Path,
) -> None:
    """Issue 36: the sink keeps no writer for an ended trial; brought back, its writers
    pick up the files on disk, so a rollback still cuts at the right line, keeps the
    abandoned lines and purges TensorBoard's later points."""
    logger = ExperimentLogger(tmp_path, flush_interval=60)
    trial = FakeTrial("t1")
    await logger.on_trial_start(trial)
    await report(logger, trial, range(1, 11), base=0.0)
    await logger.on_trial_complete(trial)
    await logger.flush()
    assert logger._sink._trials == {}  # ended: nothing kept per trial
    trial.rollback(5)
    await logger.on_trial_start(trial)
    await logger.on_trial_restore(trial, FakeCheckpoint(iteration=5))
    await report(logger, trial, range(6, 9), base=100.0)
    await logger.on_trial_complete(trial)
    await logger.aclose()

    assert [i for i, _ in history(trial)] == list(range(1, 9))
    assert_logs_equal_history(tmp_path / "t1", trial)
    abandoned = read_jsonl(tmp_path / "t1" / "result.abandoned.json")
    assert [(r["training_iteration"], r["loss"]) for r in abandoned] == [
        (i, float(i)) for i in range(6, 11)
    ]
