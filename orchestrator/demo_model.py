"""Moved to :mod:`orchestrator.cli.demo_model`.

This module stays: experiment journals record a trainable by its import path
(``orchestrator.demo_model:DigitsMLP``) and pickles name its module, so an experiment
run before the move must still resume and unpickle. Import only from the model's module
here, so a trial worker loading this path loads no more than the model.
"""

from orchestrator.cli.demo_model import *  # noqa: F403
from orchestrator.cli.demo_model import CHECKPOINT_FILE, DEFAULTS, DigitsMLP, load_digits_split

__all__ = ["CHECKPOINT_FILE", "DEFAULTS", "DigitsMLP", "load_digits_split"]
