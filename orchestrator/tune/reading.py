"""A finished run read back from its directory, without Ray: ``ExperimentAnalysis(path)``
and ``Result.from_path(path)`` as on Tune. The run's journal holds every trial's
results, config and kept checkpoints; nothing runs."""

from __future__ import annotations

import os
from typing import Any

from orchestrator.tune import restoring, saved
from orchestrator.tune.error import TuneError

__all__ = ["read_run"]


def read_run(path: Any, what: str) -> tuple[str, list[Any], str]:
    """``(uri, trials, trainable name)`` of the run at ``path`` (its trials as
    :class:`~orchestrator.tune.records.RecordedTrial`); ``what`` names the caller in an
    error (a path that holds no run of ours, or one Ray Tune wrote)."""
    from orchestrator.tune.records import RecordedTrial

    _, _, _, uri = restoring.run_at(path, what)
    record = saved.read_records(uri)
    trials = [RecordedTrial(t, uri) for t in (record.trials if record is not None else [])]
    name_of = "trainable"
    if saved.is_experiment(uri):
        name_of = str(saved.load(uri).get("trainable_name") or name_of)
    return uri, trials, name_of


def read_trial(path: Any) -> tuple[str, Any]:
    """``(experiment uri, trial)`` of a trial directory ``<experiment>/<trial id>``."""
    text = restoring.path_text(path).rstrip("/")
    parent, trial_dir = os.path.split(text) if "://" not in text else text.rsplit("/", 1)
    uri, trials, _ = read_run(parent, "Result.from_path")
    for trial in trials:
        if trial.id == trial_dir or trial_dir.startswith(f"{trial.id}_"):
            return uri, trial
    raise TuneError(
        f"Result.from_path: {text} is not a trial of the experiment {parent} (its trials: "
        f"{', '.join(t.id for t in trials) or 'none'})"
    )
