"""Ray Tune's ``ray.tune.integration.ray_train``: ``TuneReportCallback`` for a Ray Train
run inside a facade trial, Ray's documented pattern::

    def train_driver_fn(config):
        TorchTrainer(
            train_fn_per_worker,
            train_loop_config=config,
            scaling_config=ray.train.ScalingConfig(num_workers=2),
            run_config=ray.train.RunConfig(callbacks=[TuneReportCallback()]),
        ).fit()

    tune.Tuner(tune.with_resources(train_driver_fn, {"cpu": 0}), ...).fit()

It is :class:`orchestrator.integrations.ray_train.TrialReportCallback` (see there for
how it works and which layer handles which failure) reporting through ``tune.report``,
so results carry Tune's automatic keys. Unlike Ray's, rank 0's checkpoints become the
trial's own (persisted to the run's storage, in ``Result.checkpoint``), not a
``checkpoint_path`` metric, and a restarted trial's workers resume from the trial's
newest checkpoint through ``ray.train.get_checkpoint()``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from orchestrator.integrations.ray_train import TrialReportCallback
from orchestrator.tune.context import report

__all__ = ["TuneReportCallback"]


class TuneReportCallback(TrialReportCallback):
    """Ray Tune's ``TuneReportCallback`` (``ray.tune.integration.ray_train``): pass it to
    ``ray.train.RunConfig(callbacks=[...])`` in the trial's function."""

    _report: ClassVar[Any] = staticmethod(report)
