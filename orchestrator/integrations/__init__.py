"""Helpers that run a trial's function on top of another library.

Each module imports its library when it is imported itself, never here: a trial that
does not use Ray Train pays nothing for it.

- :mod:`orchestrator.integrations.ray_train`: a Ray Train run (``TorchTrainer``...) as
  one trial, through ``TrialReportCallback``.
- :mod:`orchestrator.integrations.relay`: the line from a helper process (Train's
  controller) back to the trial that started it.
"""

__all__: list[str] = []
