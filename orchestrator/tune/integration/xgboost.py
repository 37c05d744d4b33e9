"""Ray Tune's ``ray.tune.integration.xgboost``: ``TuneReportCheckpointCallback(metrics,
filename, frequency, checkpoint_at_end, results_postprocessing_fn)`` and its
``get_model(checkpoint, filename)``, on :mod:`orchestrator.integrations.xgboost`."""

from __future__ import annotations

from orchestrator.integrations.xgboost import ReportCallback
from orchestrator.tune.integration._tune_report import RemovedReportCallback, tune_report

__all__ = ["TuneReportCallback", "TuneReportCheckpointCallback"]


class TuneReportCheckpointCallback(ReportCallback):
    """Reports each boosting round to Tune, with the booster every ``frequency`` rounds
    and at the end (``checkpoint_at_end``)."""

    _report = staticmethod(tune_report)


class TuneReportCallback(RemovedReportCallback):
    """Removed from Ray Tune (it raises there too): use TuneReportCheckpointCallback."""

    instead = "use TuneReportCheckpointCallback(metrics, frequency=0, checkpoint_at_end=False)"
