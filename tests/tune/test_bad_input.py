"""Bad input to the Ray Tune facade is a clear error at once, before Ray starts: a Tune
argument or name this facade does not cover, an unknown scheduler or searcher, a restore
of a path that holds no run, tune.report outside a trial."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from orchestrator import tune
from orchestrator.errors import ConfigError, NotInTrial
from orchestrator.tune import TuneError, TuneUnsupported


def train(config: dict[str, Any]) -> None:
    tune.report({"loss": 1.0})


class Stepper(tune.Trainable):
    def step(self) -> dict[str, Any]:
        return {"loss": 1.0}


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: tune.RunConfig(sync_config=object()), r"RunConfig\(sync_config=...\)"),
        (lambda: tune.RunConfig(local_dir="/tmp"), r"RunConfig\(local_dir=...\).*storage_path"),
        (lambda: tune.TuneConfig(chdir_to_trial_dir=True), "chdir_to_trial_dir"),
        (
            lambda: tune.Tuner(train, tune_config=tune.TuneConfig(scheduler=object())),
            "scheduler=object.*ASHAScheduler",
        ),
        (
            lambda: tune.Tuner(train, tune_config=tune.TuneConfig(search_alg=object())),
            "search_alg=object.*OptunaSearch",
        ),
        (lambda: tune.Tuner("my_trainable"), "trainable by name"),
        (lambda: tune.Tuner(train, _tuner_kwargs={}), "Tuner"),
        (lambda: tune.run(train, resume="AUTO"), r"tune.run\(resume=...\).*Tuner.restore"),
        (lambda: tune.PlacementGroupFactory, "with_resources"),
    ],
)
def test_uncovered_tune_arguments_and_names_are_refused_naming_what_to_use(
    make: Any, words: str
) -> None:
    with pytest.raises(TuneUnsupported, match=words):
        make()


def test_unknown_scheduler_and_searcher_classes_fail_at_import() -> None:
    with pytest.raises(TuneUnsupported, match="PB2.*PopulationBasedTraining"):
        from orchestrator.tune.schedulers import PB2  # noqa: F401
    with pytest.raises(ImportError, match="HyperOptSearch needs hyperopt.*OptunaSearch"):
        importlib.import_module("orchestrator.tune.search.hyperopt")
    with pytest.raises(TuneUnsupported, match="TrialScheduler.*orchestrator.schedulers"):
        from orchestrator.tune.schedulers import TrialScheduler  # noqa: F401


def test_tune_checks_are_kept_with_tunes_words() -> None:
    with pytest.raises(ConfigError, match="max_failures must be 0 if fail_fast=True"):
        tune.FailureConfig(max_failures=2, fail_fast=True)
    every = tune.RunConfig(checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=2))
    with pytest.raises(ConfigError, match="'checkpoint_frequency' cannot be set for a function"):
        tune.Tuner(train, run_config=every)
    with pytest.raises(ConfigError, match="already given its own"):
        tune.Tuner(
            Stepper,
            tune_config=tune.TuneConfig(
                metric="loss",
                mode="min",
                scheduler=tune.schedulers.ASHAScheduler(metric="acc", mode="max"),
            ),
        )
    with pytest.raises(TuneUnsupported, match="not a subclass of tune.Trainable"):
        tune.Tuner(int)


def test_restoring_a_path_that_holds_no_run_is_refused(tmp_path: Path) -> None:
    assert not tune.Tuner.can_restore(str(tmp_path))
    with pytest.raises(TuneError, match=f"{tmp_path}/nothing is not an experiment"):
        tune.Tuner.restore(str(tmp_path / "nothing"), train)


def test_report_and_friends_outside_a_trial_say_where_to_call_them() -> None:
    with pytest.raises(NotInTrial, match=r"tune.report\(\) was called outside a trial"):
        tune.report({"loss": 1.0})
    with pytest.raises(NotInTrial, match=r"tune.get_checkpoint\(\)"):
        tune.get_checkpoint()
    with pytest.raises(TuneUnsupported, match=r"building Stepper\(...\) by hand"):
        Stepper({})
