"""``ray.air.integrations.wandb`` on trialflow: ``WandbLoggerCallback`` (in the driver)
and ``setup_wandb`` (in a trainable).

Unlike Ray Tune's, a trial's W&B run id is derived from the project, the group (by
default the Tune run's name) and the trial's id, so a trial restarted after a failure,
paused and resumed, or resumed by ``Tuner.restore`` continues its run, and no step is
logged twice (after a rollback the first new step carries the metric
``trialflow/rollback``); the callback never slows a trial, and a W&B that hangs never
holds a pause (see :mod:`orchestrator.integrations.tracker`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.integrations.tracker import TrackerHook
from orchestrator.integrations.wandb import WandbBackend, run_id_for
from orchestrator.tune.integration.trackers import TrackerCallback, current_trial, experiment_of

__all__ = ["WandbLoggerCallback", "setup_wandb"]


class WandbLoggerCallback(TrackerCallback):
    """Ray Tune's ``WandbLoggerCallback``: one W&B run per trial, named after it, the
    config as the run's config and each result a step (``excludes``: keys not sent).
    ``upload_checkpoints`` stores the trial's directory (its checkpoints) as an artifact
    when the trial ends. Other keyword arguments go to ``wandb.init``; ``log_config``,
    ``upload_timeout``, ``video_kwargs`` and ``image_kwargs`` are accepted (the config
    is always the run's config)."""

    def __init__(
        self,
        project: str | None = None,
        group: str | None = None,
        api_key_file: str | None = None,
        api_key: str | None = None,
        excludes: Sequence[str] | None = None,
        log_config: bool = False,
        upload_checkpoints: bool = False,
        save_checkpoints: bool = False,
        upload_timeout: int = 1800,
        video_kwargs: dict[str, Any] | None = None,
        image_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.project = project or os.environ.get("WANDB_PROJECT")
        self.group = group or os.environ.get("WANDB_RUN_GROUP")
        self.excludes = list(excludes or [])
        self.log_config = log_config
        self.upload_checkpoints = upload_checkpoints or save_checkpoints
        self.kwargs = kwargs
        key = api_key or _read_key(api_key_file)
        self.hook = TrackerHook(
            WandbBackend(
                self.project,
                group=self.group,
                dir=kwargs.pop("dir", None),
                mode=kwargs.pop("mode", None),
                api_key=key,
                init_kwargs=kwargs,
            ),
            run_name=self.run_name,
            artifact_dir=self.trial_path if self.upload_checkpoints else None,
            excludes=self.excludes,
        )

    def _first_trial(self, trial: Any) -> None:
        backend = self.hook.backend
        if isinstance(backend, WandbBackend) and backend.group is None:
            backend.group = experiment_of(trial) or None  # as Tune: the run's name


def setup_wandb(
    config: Mapping[str, Any] | None = None,
    api_key: str | None = None,
    api_key_file: str | None = None,
    rank_zero_only: bool = True,
    **kwargs: Any,
) -> Any:
    """Ray's ``setup_wandb``, in a trainable: starts (or resumes) the trial's W&B run,
    named after the trial, grouped by the Tune run's name, with the config, and returns
    it. Its id is the one ``WandbLoggerCallback`` gives the trial (same project and
    group); ``kwargs`` go to ``wandb.init`` and override these."""
    import wandb

    trial = current_trial("setup_wandb")
    key = api_key or _read_key(api_key_file)
    if key:
        os.environ.setdefault("WANDB_API_KEY", key)
    live = _RUNS.get(trial.trial_id)
    if live is not None and not getattr(live, "_is_finished", False):
        return live  # the trainable restarted in this process: its run goes on
    project = kwargs.pop("project", None) or os.environ.get("WANDB_PROJECT")
    group = kwargs.pop("group", None) or trial.experiment_name
    init: dict[str, Any] = {
        "project": project,
        "group": group,
        "id": run_id_for(project, group, trial.trial_id),
        "name": trial.trial_name,
        "resume": "allow",
        "reinit": "create_new",
        "config": dict(config if config is not None else (trial.config or {})),
        **kwargs,
    }
    run = wandb.init(**init)
    _RUNS[trial.trial_id] = run
    return run


#: This process's W&B runs of trials, by trial id (a trainable restarted here reuses it).
_RUNS: dict[str, Any] = {}


def _read_key(path: str | None) -> str | None:
    if path is None:
        return None
    with open(os.path.expanduser(path)) as file:
        return file.read().strip() or None
