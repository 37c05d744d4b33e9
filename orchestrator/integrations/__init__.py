"""Integrations with the tools people train and track with, one module each; nothing
is imported here: each module imports its library only when it is used (a trial that
does not use Ray Train or MLflow pays nothing for them).

- :mod:`orchestrator.integrations.ray_train`: a Ray Train run (``TorchTrainer``...) as
  one trial, through ``TrialReportCallback``; :mod:`orchestrator.integrations.relay`,
  the line from Train's controller back to the trial that started it.
- :mod:`orchestrator.integrations.xgboost`, ``lightgbm``, ``lightning``, ``keras``: a
  ``ReportCallback`` that reports (and checkpoints) from inside the framework's loop.
- :mod:`orchestrator.integrations.mlflow`, :mod:`orchestrator.integrations.wandb`:
  tracker hooks (one run per trial, continued across restarts and resumes) over
  :mod:`orchestrator.integrations.tracker`.
"""

__all__: list[str] = []
