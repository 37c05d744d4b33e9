"""MLflow as a trialflow hook: one MLflow run per trial (see
:mod:`orchestrator.integrations.tracker` for what the hook promises).

A trial's run is found by its tag ``trial_id`` in the MLflow experiment, so a trial
restarted, resumed or run again by a new driver continues its run; the config is the
run's params (a later change, as from PBT, is set as tags ``config/<key>``); each result
is one step (``training_iteration``) of numeric metrics. MLflow is imported by the worker
thread, when the first trial starts.

    from orchestrator.integrations.mlflow import MLflowHook
    Orchestrator(..., hooks=[MLflowHook("sqlite:///mlflow.db", experiment_name="mnist")])
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from orchestrator.integrations.backend import RunHandle, TrialRun, params_of
from orchestrator.integrations.tracker import TrackerHook

__all__ = ["MLflowBackend", "MLflowHook", "TRIAL_ID_TAG", "find_run"]

#: The tag a trial's run is found by.
TRIAL_ID_TAG = "trial_id"
_MAX_PARAM = 6000  # MLflow's longest param value
_PARAMS_PER_CALL = 100
_METRICS_PER_CALL = 1000


class MLflowBackend:
    """Runs in the tracker hook's worker thread only (MLflow's client may block)."""

    def __init__(
        self,
        tracking_uri: str | None = None,
        *,
        experiment_name: str | None = None,
        tags: Mapping[str, Any] | None = None,
        registry_uri: str | None = None,
    ) -> None:
        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name or "Default"
        self.tags = {str(k): str(v) for k, v in (tags or {}).items()}
        self.registry_uri = registry_uri
        self.label = f"MLflow at {tracking_uri or '(default tracking URI)'}"
        self._client: Any = None
        self._experiment_id: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None, "_experiment_id": None}

    def client(self) -> Any:
        if self._client is None:
            from mlflow.tracking import MlflowClient

            self._client = MlflowClient(self.tracking_uri, self.registry_uri)
        return self._client

    def experiment_id(self) -> str:
        if self._experiment_id is None:
            client = self.client()
            found = client.get_experiment_by_name(self.experiment_name)
            if found is not None:
                self._experiment_id = str(found.experiment_id)
            else:
                self._experiment_id = str(client.create_experiment(self.experiment_name))
        return self._experiment_id

    def open(self, trial: TrialRun) -> RunHandle:
        client = self.client()
        experiment = self.experiment_id()
        found = find_run(client, experiment, trial.trial_id)
        if found is None:
            run = client.create_run(
                experiment,
                run_name=trial.name,
                tags={**self.tags, TRIAL_ID_TAG: trial.trial_id, "trial_name": trial.name},
            )
            run_id = run.info.run_id
            self._log_params(run_id, params_of(trial.config), {})
            return RunHandle(run_id)
        run_id = found.info.run_id
        if found.info.status != "RUNNING":
            client.update_run(run_id, status="RUNNING")
        self._log_params(run_id, params_of(trial.config), dict(found.data.params))
        history = client.get_metric_history(run_id, "training_iteration")
        return RunHandle(run_id, step=max((int(m.step) for m in history), default=0))

    def log(self, handle: RunHandle, rows: list[tuple[int, dict[str, float]]]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [
            Metric(key, value, now, step) for step, row in rows for key, value in row.items()
        ]
        for start in range(0, len(metrics), _METRICS_PER_CALL):
            self.client().log_batch(handle.run, metrics=metrics[start : start + _METRICS_PER_CALL])

    def set_config(self, handle: RunHandle, config: Mapping[str, Any]) -> None:
        client = self.client()
        params = dict(client.get_run(handle.run).data.params)
        for key, value in params_of(config).items():
            if params.get(key) != value[:_MAX_PARAM]:
                client.set_tag(handle.run, f"config/{key}", value[:_MAX_PARAM])

    def finish(self, handle: RunHandle, status: str, artifact_dir: str | None) -> None:
        if artifact_dir is not None:
            self.log_artifacts(handle, artifact_dir)
        self.client().set_terminated(handle.run, status)

    def log_artifacts(self, handle: RunHandle, directory: str) -> None:
        """MLflow stores files with a finished run too (see ``Backend``)."""
        import os

        if os.path.isdir(directory):
            self.client().log_artifacts(handle.run, directory)

    def close(self) -> None:
        return None

    def _log_params(self, run_id: str, params: dict[str, str], present: dict[str, str]) -> None:
        from mlflow.entities import Param

        new = [Param(k, v[:_MAX_PARAM]) for k, v in params.items() if k not in present]
        for start in range(0, len(new), _PARAMS_PER_CALL):
            self.client().log_batch(run_id, params=new[start : start + _PARAMS_PER_CALL])


def find_run(client: Any, experiment_id: str, trial_id: str) -> Any:
    """The MLflow run of ``trial_id`` in the experiment (its first), or None."""
    quoted = trial_id.replace("\\", "\\\\").replace("'", "\\'")
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.{TRIAL_ID_TAG} = '{quoted}'",
        max_results=1,
        order_by=["attributes.start_time ASC"],
    )
    return runs[0] if runs else None


class MLflowHook(TrackerHook):
    """A :class:`~orchestrator.integrations.tracker.TrackerHook` sending each trial to
    MLflow (``tracking_uri``: e.g. ``sqlite:///mlflow.db`` or ``http://host:5000``; None:
    MLflow's default). ``tags`` go on every run; ``artifact_dir(trial)`` is stored with
    the run when the experiment ends (once the experiment's logs in it are written)."""

    def __init__(
        self,
        tracking_uri: str | None = None,
        *,
        experiment_name: str | None = None,
        tags: Mapping[str, Any] | None = None,
        registry_uri: str | None = None,
        run_name: Callable[[Any], str] | None = None,
        artifact_dir: Callable[[Any], str | None] | None = None,
        excludes: Sequence[str] = (),
        max_pending: int = 10_000,
        close_grace: float = 10.0,
    ) -> None:
        super().__init__(
            MLflowBackend(
                tracking_uri,
                experiment_name=experiment_name,
                tags=tags,
                registry_uri=registry_uri,
            ),
            run_name=run_name,
            artifact_dir=artifact_dir,
            excludes=excludes,
            max_pending=max_pending,
            close_grace=close_grace,
        )
