"""trialflow's orchestrator: an asyncio event-driven control plane for trials on Ray."""

from .checkpoints import Checkpoint, RetentionPolicy
from .errors import (
    ConfigError,
    InvalidTransition,
    NoCheckpointError,
    OrchestratorError,
    TrialError,
    TrialNotRunning,
)
from .hooks import HOOK_NAMES
from .lifecycle import TrialState
from .orchestrator import Orchestrator, OrchestratorStatistics
from .trainable import Trainable
from .trial import Trial

__all__ = [
    "HOOK_NAMES",
    "Checkpoint",
    "ConfigError",
    "InvalidTransition",
    "NoCheckpointError",
    "Orchestrator",
    "OrchestratorError",
    "OrchestratorStatistics",
    "RetentionPolicy",
    "Trainable",
    "Trial",
    "TrialError",
    "TrialNotRunning",
    "TrialState",
]
