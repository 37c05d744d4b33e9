"""What a tracker (MLflow, W&B...) must do for the tracker hook
(:class:`~orchestrator.integrations.tracker.TrackerHook`), and the plain data it is
handed. Every method runs in the hook's one worker thread, never on the loop, so a
backend may block: a slow one only fills the hook's queue."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from orchestrator.core.results import flatten

__all__ = ["Backend", "RunHandle", "TrialRun", "metrics_of", "params_of"]

#: Keys of a result that are not metrics (Tune's bookkeeping, the config).
NOT_METRICS = frozenset({"config", "done", "should_checkpoint"})


@dataclass(frozen=True)
class TrialRun:
    """What names a trial's tracker run: its id (the run is found again by it), the
    run's display name and the trial's config (the run's params)."""

    trial_id: str
    name: str
    config: Mapping[str, Any]


@dataclass
class RunHandle:
    """A backend's open run: ``step`` is the highest step it holds (0: none)."""

    run: Any
    step: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class Backend(Protocol):
    #: For messages: "MLflow at sqlite:///...", "W&B project p".
    label: str

    def open(self, trial: TrialRun) -> RunHandle:
        """Find the trial's run (created, or reopened as it was: its steps so far)."""
        ...

    def log(self, handle: RunHandle, rows: list[tuple[int, dict[str, float]]]) -> None:
        """Store each ``(step, metrics)``, steps increasing and after ``handle.step``."""
        ...

    def set_config(self, handle: RunHandle, config: Mapping[str, Any]) -> None:
        """The trial's config changed (a PBT exploit, a restore with a new config)."""
        ...

    def finish(self, handle: RunHandle, status: str, artifact_dir: str | None) -> None:
        """The trial ended (``FINISHED``, ``FAILED``) or the experiment did (``KILLED``);
        ``artifact_dir`` (if not None) is stored with the run first."""
        ...

    # Optional: ``log_artifacts(handle, directory)`` stores a directory with a run already
    # finished (MLflow can). A backend that has it gets the trial's directory when the
    # experiment ends, once the experiment's own logs in it are written (they are
    # flushed every second: at the trial's end they may not be yet); one without it gets
    # the directory at the trial's end, through ``finish``.

    def close(self) -> None: ...


def metrics_of(result: Mapping[str, Any], excludes: Iterable[str] = ()) -> dict[str, float]:
    """A result's numbers, nested keys named ``a/b``: what a tracker stores as metrics.
    Strings, lists and other objects are not metrics and are left out."""
    skip = NOT_METRICS.union(excludes)
    metrics: dict[str, float] = {}
    for key, value in flatten({k: v for k, v in result.items() if k not in skip}).items():
        if any(key.startswith(s + "/") for s in skip):
            continue
        number = _number(value)
        if number is not None:
            metrics[key] = number
    return metrics


def params_of(config: Mapping[str, Any]) -> dict[str, str]:
    """A config as a tracker's params: nested keys named ``a/b``, values as text."""
    return {key: _text(value) for key, value in flatten(dict(config)).items()}


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    item = getattr(value, "item", None)  # a numpy scalar
    if callable(item) and getattr(value, "shape", None) == ():
        try:
            inner = item()
        except Exception:
            return None
        if isinstance(inner, (int, float)) and not isinstance(inner, complex):
            return float(inner)
    return None


def _text(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value if isinstance(value, str) else repr(value)
