"""The facade's errors (``ray.tune.error``'s path): Tune's own error name, and what of
Ray Tune's API is not covered."""

from __future__ import annotations

from orchestrator.errors import ConfigError, OrchestratorError

__all__ = ["TuneError", "TuneUnsupported", "unsupported"]


class TuneError(OrchestratorError):
    """Ray Tune's ``TuneError`` name: scripts that catch it catch the facade's errors that
    Tune would raise as one (a failed ``fit`` with ``fail_fast="raise"``...)."""


class TuneUnsupported(ConfigError, ImportError):
    """A part of Ray Tune's API that this facade does not cover: raised at once, naming it
    and what to use instead, never silently ignored. An ``ImportError`` too, so a script
    that probes for an optional integration with ``try: import ... except ImportError``
    takes its fallback."""


def unsupported(what: str, instead: str) -> TuneUnsupported:
    return TuneUnsupported(
        f"{what} is not supported by orchestrator.tune (trialflow's Ray Tune facade); {instead}"
    )
