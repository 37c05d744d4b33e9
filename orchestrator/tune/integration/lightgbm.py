"""Ray Tune's ``ray.tune.integration.lightgbm``: ``TuneReportCheckpointCallback(metrics,
filename, frequency, checkpoint_at_end, results_postprocessing_fn)`` and its
``get_model(checkpoint, filename)``, on :mod:`orchestrator.integrations.lightgbm`."""

from __future__ import annotations

from typing import Any, NoReturn

from orchestrator.integrations.lightgbm import ReportCallback
from orchestrator.tune.errors import unsupported
from orchestrator.tune.integration._report import tune_report

__all__ = ["TuneReportCallback", "TuneReportCheckpointCallback"]


class TuneReportCheckpointCallback(ReportCallback):
    """Reports each boosting round to Tune, with the booster every ``frequency`` rounds
    and at the end (``checkpoint_at_end``)."""

    _report = staticmethod(tune_report)


class TuneReportCallback:
    """Removed from Ray Tune (it raises there too): use TuneReportCheckpointCallback."""

    def __new__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        raise unsupported(
            "ray.tune.integration.lightgbm.TuneReportCallback (removed from Ray Tune too)",
            "use TuneReportCheckpointCallback(metrics, frequency=0, checkpoint_at_end=False)",
        )
