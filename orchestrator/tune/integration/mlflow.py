"""``ray.air.integrations.mlflow`` on trialflow: ``MLflowLoggerCallback`` (in the driver)
and ``setup_mlflow`` (in a trainable).

Unlike Ray Tune's, a trial's MLflow run is found again by its tag ``trial_id``: a trial
restarted after a failure, paused and resumed, or resumed by ``Tuner.restore`` continues
its run, and no step is logged twice (after a rollback the first new step carries the
metric ``trialflow/rollback``); the callback never slows a trial (see
:mod:`orchestrator.integrations.tracker`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from orchestrator.integrations.backend import params_of
from orchestrator.integrations.mlflow import MLflowBackend, find_run
from orchestrator.integrations.tracker import TrackerHook
from orchestrator.tune.integration.trackers import TrackerCallback, current_trial

__all__ = ["MLflowLoggerCallback", "setup_mlflow"]


class MLflowLoggerCallback(TrackerCallback):
    """Ray Tune's ``MLflowLoggerCallback``: one MLflow run per trial, named after it, the
    config as params and each result a step. ``save_artifact`` stores the trial's
    directory with its run when the Tune run ends (Tune's: when the trial does; here the
    trial's logs in it are then complete). ``log_params_on_trial_end`` is accepted; the
    params are logged when the run is made either way."""

    def __init__(
        self,
        tracking_uri: str | None = None,
        *,
        registry_uri: str | None = None,
        experiment_name: str | None = None,
        tags: Mapping[str, Any] | None = None,
        tracking_token: str | None = None,
        save_artifact: bool = False,
        log_params_on_trial_end: bool = False,
    ) -> None:
        super().__init__()
        if tracking_token is not None:
            os.environ["MLFLOW_TRACKING_TOKEN"] = tracking_token
        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name or os.environ.get("MLFLOW_EXPERIMENT_NAME")
        self.tags = dict(tags or {})
        self.should_save_artifact = save_artifact
        self.log_params_on_trial_end = log_params_on_trial_end
        self.hook = TrackerHook(
            MLflowBackend(
                tracking_uri,
                experiment_name=self.experiment_name,
                tags=self.tags,
                registry_uri=registry_uri,
            ),
            run_name=self.run_name,
            artifact_dir=self.trial_path if save_artifact else None,
        )


def setup_mlflow(
    config: Mapping[str, Any] | None = None,
    tracking_uri: str | None = None,
    registry_uri: str | None = None,
    experiment_id: str | None = None,
    experiment_name: str | None = None,
    tracking_token: str | None = None,
    artifact_location: str | None = None,
    run_name: str | None = None,
    create_experiment_if_not_exists: bool = False,
    tags: Mapping[str, Any] | None = None,
    rank_zero_only: bool = True,
) -> Any:
    """Ray's ``setup_mlflow``, in a trainable: starts (or continues: found by the tag
    ``trial_id``) the trial's MLflow run as the active run of the trainable's thread,
    with the config as params, and returns the ``mlflow`` module for the trainable's own
    ``mlflow.log_*`` calls. The run ends with the function: FINISHED when it returns,
    FAILED when it raises, KILLED when the trial is stopped or paused. The experiment is
    ``experiment_name`` (or ``_id``), else ``config["mlflow"]``'s, else
    ``MLFLOW_EXPERIMENT_NAME``, else the Tune run's name."""
    import mlflow

    trial = current_trial("setup_mlflow")
    legacy = (config or {}).get("mlflow")  # Tune's older way: config["mlflow"] = {...}
    if isinstance(legacy, Mapping):
        tracking_uri = tracking_uri or legacy.get("tracking_uri")
        experiment_name = experiment_name or legacy.get("experiment_name")
        experiment_id = experiment_id or legacy.get("experiment_id")
    if tracking_token is not None:
        os.environ["MLFLOW_TRACKING_TOKEN"] = tracking_token
    if tracking_uri is not None:
        mlflow.set_tracking_uri(tracking_uri)
    if registry_uri is not None:
        mlflow.set_registry_uri(registry_uri)
    experiment_id = experiment_id or os.environ.get("MLFLOW_EXPERIMENT_ID")
    experiment_name = experiment_name or os.environ.get("MLFLOW_EXPERIMENT_NAME")
    client = mlflow.MlflowClient()
    if experiment_id is None:
        name = experiment_name or trial.experiment_name or "Default"
        found = client.get_experiment_by_name(name)
        if found is not None:
            experiment_id = str(found.experiment_id)
        elif create_experiment_if_not_exists or experiment_name is None:
            experiment_id = str(client.create_experiment(name, artifact_location))
        else:
            raise ValueError(
                f"setup_mlflow: no MLflow experiment named {name!r} at "
                f"{mlflow.get_tracking_uri()}; create it, or pass "
                "create_experiment_if_not_exists=True"
            )
    run = find_run(client, experiment_id, trial.trial_id)
    active = mlflow.active_run()
    if active is not None and run is not None and active.info.run_id == run.info.run_id:
        return mlflow  # called again in the same run of the trainable
    if active is not None:
        mlflow.end_run()
    if run is not None:
        started = mlflow.start_run(run_id=run.info.run_id)
    else:
        all_tags = {
            **{str(k): str(v) for k, v in (tags or {}).items()},
            "trial_id": trial.trial_id,
            "trial_name": trial.trial_name,
        }
        started = mlflow.start_run(
            experiment_id=experiment_id, run_name=run_name or trial.trial_name, tags=all_tags
        )
    _end_with_the_function(mlflow, started.info.run_id)
    present = dict(run.data.params) if run is not None else {}
    params = params_of(config if config is not None else (trial.config or {}))
    new = {k: v[:6000] for k, v in params.items() if k not in present}
    if new:
        mlflow.log_params(new)
    return mlflow


#: The MLflow status a run of ``setup_mlflow`` ends with, by how the function's run ended.
END_STATUS = {"finished": "FINISHED", "failed": "FAILED", "stopped": "KILLED"}


def _end_with_the_function(mlflow: Any, run_id: str) -> None:
    """End the MLflow run when the trial's function does: returned FINISHED, raised
    FAILED, stopped by the driver (its scheduler, a stop criterion, a pause) KILLED. A
    paused trial's next ``setup_mlflow`` sets its run RUNNING again. Left open, the
    run stayed RUNNING for good (MLflow ends it at the process's exit, which a reused
    worker postpones and a killed one never reaches)."""
    from orchestrator.actor.function import on_run_end
    from orchestrator.errors import NotInTrial

    def end(outcome: str) -> None:
        active = mlflow.active_run()
        if active is not None and active.info.run_id == run_id:  # not ended by the user
            mlflow.end_run(END_STATUS[outcome])

    try:
        on_run_end(end)
    except NotInTrial:  # a class trainable: its run ends with its process, as on Tune
        pass
