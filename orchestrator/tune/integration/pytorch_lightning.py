"""Ray Tune's ``ray.tune.integration.pytorch_lightning``: ``TuneReportCheckpointCallback(
metrics, filename, save_checkpoints, on)`` and ``TuneReportCallback(metrics, on)`` (no
checkpoints), on :mod:`orchestrator.integrations.lightning`."""

from __future__ import annotations

from orchestrator.integrations._report import Metrics
from orchestrator.integrations.lightning import ReportCallback
from orchestrator.tune.integration._tune_report import tune_report

__all__ = ["TuneReportCallback", "TuneReportCheckpointCallback"]


class TuneReportCheckpointCallback(ReportCallback):
    """Reports ``metrics`` to Tune at each hook of ``on``, with the trainer's checkpoint
    when ``save_checkpoints``."""

    _report = staticmethod(tune_report)


class TuneReportCallback(TuneReportCheckpointCallback):
    """Reports ``metrics`` to Tune at each hook of ``on``, without checkpoints."""

    def __init__(self, metrics: Metrics = None, on: str | list[str] = "validation_end") -> None:
        super().__init__(metrics=metrics, save_checkpoints=False, on=on)
