"""What the facade's tracker callbacks share: a Tune ``LoggerCallback`` driving one of
trialflow's tracker hooks (:mod:`orchestrator.integrations.tracker`), and the trial a
``setup_*`` call in a trainable belongs to.

The callback's methods run in trialflow's hook thread (the facade's ``TuneHooks``) and
only queue, so no tracker call slows a trial or holds a pause; ``on_experiment_end``
waits for the tracker while it gets on (one stuck for the hook's ``close_grace``, 10 s,
is abandoned)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.integrations.tracker import TrackerHook
from orchestrator.tune.logger import LoggerCallback

__all__ = ["CurrentTrial", "TrackerCallback", "current_trial", "experiment_of"]


class _TuneTrialView:
    """A Tune trial as the tracker hook reads a trial: its id and config. (Its history
    is not needed: the tracker's own last step says what is already stored.)"""

    __slots__ = ("_trial", "id")

    def __init__(self, trial: Any) -> None:
        self._trial = trial
        self.id = str(trial.trial_id)

    @property
    def config(self) -> dict[str, Any]:
        return dict(self._trial.config)

    results: tuple[Any, ...] = ()
    latest_checkpoint = None


class TrackerCallback(LoggerCallback):
    """Tune's logger hooks onto a :class:`TrackerHook` (``self.hook``, set by the
    subclass, with :meth:`run_name` and :meth:`trial_path` for the hook to call)."""

    hook: TrackerHook

    def __init__(self) -> None:
        self._views: dict[str, _TuneTrialView] = {}
        self._seen: dict[str, tuple[str, str]] = {}  # trial id -> (name, directory)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with the run's configs for ``Tuner.restore``: no trial goes along."""
        return {**self.__dict__, "_views": {}, "_seen": {}}

    def run_name(self, view: Any) -> str:
        return self._seen.get(str(view.id), (str(view.id), ""))[0]

    def trial_path(self, view: Any) -> str | None:
        return self._seen.get(view.id, ("", ""))[1] or None

    def _view(self, trial: Any) -> _TuneTrialView:
        key = str(trial.trial_id)
        view = self._views.get(key)
        if view is None:
            self._seen[key] = (str(trial), str(getattr(trial, "local_path", "") or ""))
            self._first_trial(trial)
            view = self._views[key] = _TuneTrialView(trial)
        return view

    def _first_trial(self, trial: Any) -> None:
        """Called once per trial before the hook sees it (a backend's defaults)."""
        return None

    def log_trial_start(self, trial: Any) -> None:
        self.hook.on_trial_start(self._view(trial))

    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        self.hook.on_trial_result(self._view(trial), result)

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        self.hook.end_trial(self._view(trial), failed=failed)

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self.hook.close()


def experiment_of(trial: Any) -> str:
    """The Tune run's name: the folder of the trial's directory."""
    path = str(getattr(trial, "local_path", "") or "").rstrip("/")
    return os.path.basename(os.path.dirname(path))


@dataclass(frozen=True)
class CurrentTrial:
    """The trial whose trainable called a tracker's ``setup_*``: what the tracker names
    its run by (see :func:`current_trial`)."""

    trial_id: str
    trial_name: str
    experiment_name: str | None
    config: Mapping[str, Any] | None


def current_trial(what: str) -> CurrentTrial:
    """The trial whose trainable calls ``what``: a Tune function (its Tune context gives
    the trial's name and run), or one of trialflow's function trainables (its id)."""
    from orchestrator.actor.function import current_trial_id
    from orchestrator.errors import NotInTrial
    from orchestrator.tune.context import current

    context = current()
    try:
        trial_id = current_trial_id()
    except NotInTrial:  # a thread the trainable started: the Tune context, if any
        if context is None:
            raise NotInTrial(
                f"{what}() was called outside a trial: call it from the training function "
                "given to tune.Tuner (or add_trial), in its thread"
            ) from None
        trial_id = context.trial_id
    if context is None or context.trial_id != trial_id:  # not a Tune function
        return CurrentTrial(trial_id, trial_id, None, None)
    return CurrentTrial(
        context.trial_id, context.trial_name, context.info.experiment_name, context.config
    )
