"""Ray Tune's schedulers (``ray.tune.schedulers``) over trialflow's: each class takes
Tune's arguments and is trialflow's scheduler (see :mod:`.base`)."""

from __future__ import annotations

from orchestrator.tune.schedulers.async_hyperband import ASHAScheduler, AsyncHyperBandScheduler
from orchestrator.tune.schedulers.base import FIFOScheduler, TuneScheduler
from orchestrator.tune.schedulers.hyperband import HyperBandScheduler
from orchestrator.tune.schedulers.median_stopping_rule import MedianStoppingRule
from orchestrator.tune.schedulers.pbt import PopulationBasedTraining
from orchestrator.tune.unsupported import getattr_for, refused_class

__all__ = [
    "ASHAScheduler",
    "AsyncHyperBandScheduler",
    "FIFOScheduler",
    "HyperBandForBOHB",
    "HyperBandScheduler",
    "MedianStoppingRule",
    "PopulationBasedTraining",
    "TuneScheduler",
]

#: Imported by libraries that test ``isinstance(scheduler, HyperBandForBOHB)`` (Hugging
#: Face's ``hyperparameter_search``); building one is refused.
HyperBandForBOHB = refused_class(
    "HyperBandForBOHB", "schedulers", "it pairs with TuneBOHB: use HyperBandScheduler"
)

__getattr__ = getattr_for("schedulers")
