"""LightGBM: report (and checkpoint) from inside ``lightgbm.train``'s loop.

``lightgbm.train(..., callbacks=[ReportCallback(metrics={"loss": "eval-binary_logloss"},
frequency=5)])`` in a function trainable reports each boosting round's evaluation
results (``"<valid set>-<metric>"``; under ``lightgbm.cv``, ``"-mean"`` and ``"-stdv"``
suffixed) as one result; every ``frequency``-th round carries the booster, saved as
``filename``, as its checkpoint, and with ``checkpoint_at_end`` the last round carries it
too (one result per round, Ray Tune's rule for LightGBM). A trial resumes with
``lightgbm.train(..., init_model=ReportCallback.get_model(get_checkpoint()))``.
Under ``lightgbm.cv`` the model is a set of folds: no checkpoint is made.
"""

from __future__ import annotations

import os
from typing import Any

from orchestrator.integrations._report import (
    BoostingRounds,
    Metrics,
    Postprocess,
    Reporter,
    checkpoint_directory,
    missing_library,
    plain_report,
    report_saved,
)

try:
    import lightgbm
except ImportError as err:  # pragma: no cover - the extra installs it
    raise missing_library("lightgbm", "lightgbm", err) from None

__all__ = ["ReportCallback"]


class ReportCallback(BoostingRounds):
    """Reports every boosting round, with the booster every ``frequency`` rounds (0:
    never) and on the last round (``checkpoint_at_end``)."""

    CHECKPOINT_NAME = "model.txt"

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
        self._keep_options(
            metrics, filename, frequency, checkpoint_at_end, results_postprocessing_fn
        )

    @classmethod
    def get_model(cls, checkpoint: Any, filename: str = CHECKPOINT_NAME) -> lightgbm.Booster:
        """The booster a checkpoint of this callback holds (a directory path, or the
        facade's ``Checkpoint``)."""
        with checkpoint_directory(checkpoint) as directory:
            return lightgbm.Booster(model_file=os.path.join(directory, filename))

    def _metrics_of(self, env: Any) -> dict[str, Any]:
        latest: dict[str, Any] = {}
        for entry in env.evaluation_result_list:
            data, name, value = entry[0], entry[1], entry[2]
            if len(entry) > 4:  # lightgbm.cv: (data, name, mean, higher_better, stdv)
                latest[f"{data}-{name}-mean"] = value
                latest[f"{data}-{name}-stdv"] = entry[4]
            else:
                latest[f"{data}-{name}"] = value
        return self._reported(latest, "LightGBM")

    def __call__(self, env: Any) -> None:
        metrics = self._metrics_of(env)
        last = env.iteration == env.end_iteration - 1
        due = (self._frequency > 0 and (env.iteration + 1) % self._frequency == 0) or (
            last and self._checkpoint_at_end
        )
        model = env.model
        if due and isinstance(model, lightgbm.Booster):
            path = self._filename
            report_saved(
                type(self)._report,
                metrics,
                lambda directory: model.save_model(os.path.join(directory, path)),
            )
        else:
            type(self)._report(metrics, None)
