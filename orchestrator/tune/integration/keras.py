"""Ray Tune's ``ray.tune.integration.keras``: ``TuneReportCheckpointCallback(
checkpoint_on, report_metrics_on, metrics)``, on :mod:`orchestrator.integrations.keras`;
``TuneReportCheckpointCallback.get_model(result.checkpoint)`` loads the model back (Ray
Train's ``TensorflowCheckpoint.get_model()`` reads the same ``model.keras``)."""

from __future__ import annotations

from orchestrator.integrations.keras import ReportCallback
from orchestrator.tune.integration._tune_report import RemovedReportCallback, tune_report

__all__ = ["TuneReportCallback", "TuneReportCheckpointCallback"]


class TuneReportCheckpointCallback(ReportCallback):
    """Reports Keras' logs to Tune at each hook of ``report_metrics_on``, with the model
    at each hook of ``checkpoint_on``."""

    _report = staticmethod(tune_report)


class TuneReportCallback(RemovedReportCallback):
    """Removed from Ray Tune (it raises there too): use TuneReportCheckpointCallback."""

    instead = (
        "use TuneReportCheckpointCallback(metrics=..., checkpoint_on=[]) to report "
        "without checkpoints"
    )
