"""How the facade's framework callbacks report: ``tune.report``, so results get Ray
Tune's automatic keys and checkpoints arrive as the trial's ``Checkpoint``."""

from __future__ import annotations

from typing import Any

__all__ = ["tune_report"]


def tune_report(metrics: dict[str, Any], checkpoint: str | None) -> None:
    from orchestrator.tune.context import report

    report(metrics, checkpoint=checkpoint)
