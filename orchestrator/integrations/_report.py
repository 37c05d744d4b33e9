"""What the framework callbacks share: picking and renaming metrics, and reporting a
model saved into a fresh directory through the function-trainable API's ``report``."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.errors import ConfigError

__all__ = [
    "BoostingRounds",
    "Metrics",
    "MissingLibrary",
    "Postprocess",
    "Reporter",
    "checkpoint_directory",
    "flatten",
    "missing_library",
    "pick",
    "plain_report",
    "report_saved",
]

#: Which metrics a callback reports: None (all), one name, names, or {ours: theirs}.
Metrics = str | list[str] | dict[str, str] | None

#: ``report(metrics, checkpoint_dir_or_None)``: the native API's, or the facade's.
Reporter = Callable[[dict[str, Any], str | None], None]

#: Ray Tune's ``results_postprocessing_fn``: the picked metrics -> the reported ones.
Postprocess = Callable[[dict[str, Any]], dict[str, Any]]


def plain_report(metrics: dict[str, Any], checkpoint: str | None) -> None:
    from orchestrator.actor.function import report

    report(metrics, checkpoint=checkpoint)


class MissingLibrary(ConfigError, ImportError):
    """A framework's module imported without the framework: an ImportError too, so a
    script's ``try: import ... except ImportError`` fallback still works."""


def missing_library(
    framework: str, package: str, err: ImportError, hint: str = ""
) -> MissingLibrary:
    return MissingLibrary(
        f"orchestrator.integrations.{framework} needs {package}, which is not importable "
        f"({err}): pip install {package} (or trialflow's 'frameworks' extra){hint}"
    )


def normalize(metrics: Metrics) -> list[str] | dict[str, str] | None:
    return [metrics] if isinstance(metrics, str) else metrics


def flatten(nested: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"eval": {"logloss": x}}`` -> ``{"eval-logloss": x}`` (the frameworks' own
    dashed names, as they print them)."""
    flat: dict[str, Any] = {}
    for key, value in nested.items():
        name = f"{prefix}-{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(flatten(value, name))
        else:
            flat[name] = value
    return flat


def pick(
    available: dict[str, Any],
    metrics: list[str] | dict[str, str] | None,
    framework: str,
) -> dict[str, Any]:
    """The reported dict: every metric, or the chosen ones under their chosen names."""
    if not metrics:
        return dict(available)
    wanted = metrics if isinstance(metrics, dict) else {name: name for name in metrics}
    missing = [theirs for theirs in wanted.values() if theirs not in available]
    if missing:
        raise ConfigError(
            f"the {framework} callback was asked to report {missing}, which {framework} "
            f"did not log this iteration; it logged {sorted(available)}: name one of those"
        )
    return {ours: available[theirs] for ours, theirs in wanted.items()}


class BoostingRounds:
    """What XGBoost's and LightGBM's callbacks share: Ray Tune's arguments, checked and
    kept, and each round's metrics picked then post-processed. A mixin without
    ``__init__``, beside the framework's own callback base."""

    _metrics: list[str] | dict[str, str] | None
    _filename: str
    _frequency: int
    _checkpoint_at_end: bool
    _postprocess: Postprocess | None

    def _keep_options(
        self,
        metrics: Metrics,
        filename: str,
        frequency: int,
        checkpoint_at_end: bool,
        results_postprocessing_fn: Postprocess | None,
    ) -> None:
        if frequency < 0:
            raise ValueError(
                f"frequency must be >= 0 (0: no checkpoint per round), got {frequency}"
            )
        self._metrics = normalize(metrics)
        self._filename = filename
        self._frequency = frequency
        self._checkpoint_at_end = checkpoint_at_end
        self._postprocess = results_postprocessing_fn

    def _reported(self, latest: dict[str, Any], framework: str) -> dict[str, Any]:
        """The round's metrics to report: the chosen ones, post-processed."""
        picked = pick(latest, self._metrics, framework)
        return dict(self._postprocess(picked)) if self._postprocess is not None else picked


def report_saved(report: Reporter, metrics: dict[str, Any], save: Callable[[str], object]) -> None:
    """Save the model into a fresh directory and report it with ``metrics``; ``report``
    takes the files, and the directory goes afterwards."""
    directory = tempfile.mkdtemp(prefix="trialflow_model_")
    try:
        save(directory)
        report(metrics, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def checkpoint_directory(checkpoint: Any) -> Any:
    """A context manager giving a local directory for a checkpoint: a path, or an object
    with ``as_directory()`` (the facade's ``Checkpoint``, which downloads a remote one)."""
    import contextlib

    if hasattr(checkpoint, "as_directory"):
        return checkpoint.as_directory()
    return contextlib.nullcontext(os.fspath(checkpoint))
