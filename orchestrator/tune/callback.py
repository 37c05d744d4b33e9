"""Ray Tune's ``Callback``: subclass it and implement the hooks you need. They run in the
driver, off the trials' path (trialflow's hooks: a slow callback delays only later
callbacks, never a trial), in Tune's order per trial, one call at a time."""

from __future__ import annotations

from typing import Any

__all__ = ["Callback"]


class Callback:
    """Ray Tune's callback base class; every hook does nothing by default."""

    def setup(
        self,
        stop: Any = None,
        num_samples: int | None = None,
        total_num_samples: int | None = None,
        **info: Any,
    ) -> None:
        return None

    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        return None

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        return None

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        return None

    def on_trial_restore(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        return None

    def on_trial_save(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        return None

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any
    ) -> None:
        return None

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        return None

    def on_trial_recover(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        return None

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        return None

    def on_checkpoint(
        self, iteration: int, trials: list[Any], trial: Any, checkpoint: Any, **info: Any
    ) -> None:
        return None

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        return None

    def get_state(self) -> dict[str, Any] | None:
        return None

    def set_state(self, state: dict[str, Any]) -> None:
        return None
