"""``ray.tune.logger``: ``LoggerCallback`` (a Callback with Tune's logger hooks), and
Tune's built-in loggers' names, which are trialflow's per-trial logs (on by default:
``result.json``, ``progress.csv``, ``params.json`` and TensorBoard files in each trial's
directory)."""

from __future__ import annotations

from typing import Any

from orchestrator.tune.callback import Callback

__all__ = ["CSVLoggerCallback", "JsonLoggerCallback", "LoggerCallback", "TBXLoggerCallback"]


class LoggerCallback(Callback):
    """Tune's logger base: ``log_trial_start``, ``log_trial_result``, ``log_trial_end``
    (with ``failed``), called from the matching callback hooks."""

    def log_trial_start(self, trial: Any) -> None:
        return None

    def log_trial_restore(self, trial: Any) -> None:
        return None

    def log_trial_save(self, trial: Any) -> None:
        return None

    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        return None

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        return None

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.log_trial_start(trial)

    def on_trial_restore(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.log_trial_restore(trial)

    def on_trial_save(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.log_trial_save(trial)

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        self.log_trial_result(iteration, trial, result)

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.log_trial_end(trial, failed=False)

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.log_trial_end(trial, failed=True)


class _BuiltIn(LoggerCallback):
    """One of Tune's built-in loggers: trialflow writes the same files by default, so
    giving it changes nothing (and giving it twice writes nothing twice)."""

    kind = ""


class JsonLoggerCallback(_BuiltIn):
    kind = "json"


class CSVLoggerCallback(_BuiltIn):
    kind = "csv"


class TBXLoggerCallback(_BuiltIn):
    kind = "tensorboard"
