"""Ray Tune's legacy entry point, ``tune.run(trainable, config=..., ...)``, at Tune's
module path (``ray.tune.tune``): a submodule named ``run`` would shadow the function
``tune.run`` once imported.

Older scripts and libraries (Hugging Face's ``hyperparameter_search`` among them) still
call it. Its arguments are spread out into a ``Tuner``'s configs, once, and the run is
a ``Tuner(...).fit()``; what comes back is an
:class:`~orchestrator.tune.analysis.ExperimentAnalysis`. Tune's deprecated checkpoint
arguments (``keep_checkpoints_num``, ``checkpoint_score_attr``, ``checkpoint_freq``,
``checkpoint_at_end``) still work, as on Tune; ``local_dir`` is taken as
``storage_path`` (Tune now refuses it: taking it keeps old scripts running, and it
meant the same place). Arguments that have no counterpart here are refused by name.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from orchestrator.tune.adapters import WithResources, trainable_name, unwrap
from orchestrator.tune.analysis import ExperimentAnalysis
from orchestrator.tune.config import CheckpointConfig, FailureConfig, RunConfig, TuneConfig
from orchestrator.tune.error import TuneError, unsupported
from orchestrator.tune.tuner import Tuner

__all__ = ["run"]

log = logging.getLogger("orchestrator.tune")


def run(
    run_or_experiment: Any,
    *,
    name: str | None = None,
    metric: str | None = None,
    mode: str | None = None,
    stop: Any = None,
    time_budget_s: Any = None,
    config: Mapping[str, Any] | None = None,
    resources_per_trial: Any = None,
    num_samples: int = 1,
    storage_path: str | None = None,
    storage_filesystem: Any = None,
    search_alg: Any = None,
    scheduler: Any = None,
    checkpoint_config: CheckpointConfig | None = None,
    verbose: int | None = None,
    progress_reporter: Any = None,
    log_to_file: Any = False,
    trial_name_creator: Callable[[Any], str] | None = None,
    trial_dirname_creator: Callable[[Any], str] | None = None,
    sync_config: Any = None,
    export_formats: Sequence[Any] | None = None,
    max_failures: int = 0,
    fail_fast: bool | str = False,
    restore: str | None = None,
    resume: Any = None,
    resume_config: Any = None,
    reuse_actors: bool | None = None,
    raise_on_failed_trial: bool = True,
    callbacks: Sequence[Any] | None = None,
    max_concurrent_trials: int | None = None,
    keep_checkpoints_num: int | None = None,
    checkpoint_score_attr: str | None = None,
    checkpoint_freq: int = 0,
    checkpoint_at_end: bool = False,
    chdir_to_trial_dir: Any = "DEPRECATED",
    local_dir: str | None = None,
) -> ExperimentAnalysis:
    """Run ``run_or_experiment`` (a function or ``tune.Trainable``) over ``config``, as
    ``Tuner(...).fit()`` would; the analysis of its trials. With
    ``raise_on_failed_trial`` (the default) a trial that did not end TERMINATED makes it
    raise ``TuneError("Trials did not complete: ...")``, as on Tune."""
    for argument, value, instead in (
        ("restore", restore, "use tune.Tuner.restore(path, trainable).fit()"),
        ("resume", resume, "use tune.Tuner.restore(path, trainable).fit()"),
        ("resume_config", resume_config, "use tune.Tuner.restore(path, trainable, ...)"),
        ("export_formats", export_formats, "read the trial's checkpoints (Result.checkpoint)"),
    ):
        if value not in (None, False):
            raise unsupported(f"tune.run({argument}=...)", instead)
    if isinstance(run_or_experiment, (list, tuple)) or type(run_or_experiment).__name__ == (
        "Experiment"
    ):
        raise unsupported("tune.run(Experiment(...))", "pass the trainable and its arguments")
    if local_dir is not None:
        if storage_path is not None and storage_path != local_dir:
            raise TuneError(
                f"tune.run: local_dir={local_dir!r} and storage_path={storage_path!r} name two "
                "places; give storage_path only"
            )
        log.warning("tune.run(local_dir=...) is deprecated in Ray Tune: taken as storage_path")
        storage_path = local_dir
    trainable = run_or_experiment
    if resources_per_trial is not None:
        _, _, given = unwrap(trainable, put=False)
        if given is not None:
            raise TuneError(
                "tune.run: resources_per_trial and tune.with_resources(...) both set a "
                "trial's resources; keep one"
            )
        trainable = WithResources(trainable, resources_per_trial)
    tune_config = TuneConfig(
        mode=mode,
        metric=metric,
        search_alg=search_alg,
        scheduler=scheduler,
        num_samples=num_samples,
        max_concurrent_trials=max_concurrent_trials,
        time_budget_s=time_budget_s,
        reuse_actors=reuse_actors,
        trial_name_creator=trial_name_creator,
        trial_dirname_creator=trial_dirname_creator,
        chdir_to_trial_dir=chdir_to_trial_dir,
    )
    run_config = RunConfig(
        name=name,
        storage_path=storage_path,
        storage_filesystem=storage_filesystem,
        failure_config=FailureConfig(max_failures=max_failures, fail_fast=fail_fast),
        checkpoint_config=_checkpoint_config(
            checkpoint_config,
            keep_checkpoints_num,
            checkpoint_score_attr,
            checkpoint_freq,
            checkpoint_at_end,
        ),
        sync_config=sync_config,
        verbose=verbose,
        stop=stop,
        callbacks=callbacks,
        progress_reporter=progress_reporter,
        log_to_file=log_to_file,
    )
    grid = Tuner(
        trainable, param_space=dict(config or {}), tune_config=tune_config, run_config=run_config
    ).fit()
    user, _, _ = unwrap(trainable, put=False)
    analysis = ExperimentAnalysis.of(grid, trainable_name(user), trial_name_creator)
    incomplete = [t for t in analysis.trials if t.status != "TERMINATED"]
    if incomplete and raise_on_failed_trial:
        raise TuneError(f"Trials did not complete: {incomplete}")
    if incomplete:
        log.error("Trials did not complete: %s", incomplete)
    return analysis


def _checkpoint_config(
    given: CheckpointConfig | None,
    keep: int | None,
    score_attr: str | None,
    frequency: int,
    at_end: bool,
) -> CheckpointConfig:
    """``checkpoint_config`` with Tune's deprecated arguments applied over it, as Tune
    applies them (``checkpoint_score_attr="min-loss"``: the lowest loss is best)."""
    changes: dict[str, Any] = {}
    if keep is not None:
        changes["num_to_keep"] = keep
    if score_attr is not None:
        order = "max"
        if score_attr.startswith("min-"):
            score_attr, order = score_attr[len("min-") :], "min"
        changes["checkpoint_score_attribute"] = score_attr
        changes["checkpoint_score_order"] = order
    if frequency:
        changes["checkpoint_frequency"] = frequency
    if at_end:
        changes["checkpoint_at_end"] = at_end
    return dataclasses.replace(given or CheckpointConfig(), **changes)
