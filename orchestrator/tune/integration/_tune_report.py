"""How the facade's framework callbacks report: ``tune.report``, so results get Ray
Tune's automatic keys and checkpoints arrive as the trial's ``Checkpoint``; and the
``TuneReportCallback`` Ray Tune removed, which raises here as it does there."""

from __future__ import annotations

from typing import Any, ClassVar, NoReturn

from orchestrator.tune.error import unsupported

__all__ = ["RemovedReportCallback", "tune_report"]


def tune_report(metrics: dict[str, Any], checkpoint: str | None) -> None:
    from orchestrator.tune.context import report

    report(metrics, checkpoint=checkpoint)


class RemovedReportCallback:
    """Ray Tune's removed ``TuneReportCallback`` of a framework's module (the subclass's
    ``__module__`` names it): making one raises, saying to do ``instead``."""

    instead: ClassVar[str]

    def __new__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        module = cls.__module__.replace("orchestrator.tune.", "ray.tune.", 1)
        raise unsupported(f"{module}.{cls.__name__} (removed from Ray Tune too)", cls.instead)
