"""XGBoost: report (and checkpoint) from inside ``xgboost.train``'s loop.

``xgboost.train(..., callbacks=[ReportCallback(metrics={"loss": "eval-logloss"},
frequency=5)])`` in a function trainable reports each boosting round's evaluation
results (``"<eval set>-<metric>"``, as XGBoost logs them) as one result; every
``frequency``-th round (counted from the start of this call) carries the booster, saved
as ``filename``, as the result's checkpoint; ``checkpoint_at_end`` reports the final
booster once more after the last round unless that round already carried it (Ray
Tune's rule). A trial resumes with ``xgboost.train(..., xgb_model=ReportCallback
.get_model(get_checkpoint()))``.

Under ``xgboost.cv`` the model is a set of folds with nothing to save: rounds report
their (mean, std) pairs, to be reduced by ``results_postprocessing_fn``, and no
checkpoint is made.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from orchestrator.integrations._report import (
    BoostingRounds,
    Metrics,
    Postprocess,
    Reporter,
    checkpoint_directory,
    flatten,
    missing_library,
    plain_report,
    report_saved,
)

try:
    import xgboost
    from xgboost.callback import TrainingCallback
except ImportError as err:  # pragma: no cover - the extra installs it
    raise missing_library("xgboost", "xgboost", err) from None

__all__ = ["ReportCallback"]


class ReportCallback(TrainingCallback, BoostingRounds):
    """Reports every boosting round, with the booster every ``frequency`` rounds (0:
    never) and at the end (``checkpoint_at_end``)."""

    CHECKPOINT_NAME = "model.ubj"

    #: How a result (and a checkpoint directory) leaves: the facade's subclass adds
    #: Ray Tune's automatic keys.
    _report: Reporter = staticmethod(plain_report)

    def __init__(
        self,
        metrics: Metrics = None,
        filename: str = CHECKPOINT_NAME,
        frequency: int = 0,
        checkpoint_at_end: bool = True,
        results_postprocessing_fn: Postprocess | None = None,
    ) -> None:
        super().__init__()
        self._keep_options(
            metrics, filename, frequency, checkpoint_at_end, results_postprocessing_fn
        )
        self._last: dict[str, Any] | None = None
        self._round = -1
        self._saved_round: int | None = None

    @classmethod
    def get_model(cls, checkpoint: Any, filename: str = CHECKPOINT_NAME) -> xgboost.Booster:
        """The booster a checkpoint of this callback holds (a directory path, or the
        facade's ``Checkpoint``)."""
        with checkpoint_directory(checkpoint) as directory:
            booster = xgboost.Booster()
            booster.load_model(os.path.join(directory, filename))
            return booster

    def _metrics_of(self, evals_log: Any) -> dict[str, Any]:
        latest = {name: values[-1] for name, values in flatten(evals_log).items() if values}
        return self._reported(latest, "XGBoost")

    def _save(self, model: Any) -> Callable[[str], None]:
        return lambda directory: model.save_model(os.path.join(directory, self._filename))

    def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        self._round = epoch
        self._last = self._metrics_of(evals_log)
        due = self._frequency > 0 and (epoch + 1) % self._frequency == 0
        if due and _savable(model):
            self._saved_round = epoch
            report_saved(type(self)._report, dict(self._last), self._save(model))
        else:
            type(self)._report(dict(self._last), None)
        return False  # never asks XGBoost to stop: a stop is the driver's decision

    def after_training(self, model: Any) -> Any:
        if self._checkpoint_at_end and _savable(model) and self._saved_round != self._round:
            report_saved(type(self)._report, dict(self._last or {}), self._save(model))
        return model


def _savable(model: Any) -> bool:
    """A booster (``xgboost.cv`` hands its folds instead, which cannot be saved)."""
    return isinstance(model, xgboost.Booster)
