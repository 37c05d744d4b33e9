"""Ray Tune's callbacks run through trialflow's hooks, with Tune's arguments.

One hook object (:class:`TuneHooks`) receives trialflow's hook calls for the run's
trials and calls each Tune callback's matching method with Tune's arguments
(``iteration``, ``trials``, ``trial``, ``result``...): ``trial`` is a
:class:`~orchestrator.tune.tune_trial.TuneTrial`, one per trial, the same object each time.
trialflow runs sync hooks in a thread, per trial in order; a lock here makes the calls
into callbacks one at a time, as Tune's controller makes them. trialflow's hook for a
failure fires for every failure: it becomes Tune's ``on_trial_recover`` when the trial
is retried and ``on_trial_error`` when it is not. Each of these events is one of Tune's
controller steps: ``on_step_begin`` comes before its callbacks and ``on_step_end`` after
(Tune's controller also steps while nothing happens; an idle run here calls neither).

A callback that sets ``SHOULD_CHECKPOINT`` in a result asks for a checkpoint: the trial
saves right after its next result (the step in flight, since callbacks run beside the
trials; on Tune, before any further step). A callback that raises ends the run as on
Tune: ``fit()`` raises its exception, and ``Tuner.restore`` continues what was left.
The same hook carries out ``trial_dirname_creator`` (the trial's directory is also
reachable by that name: a symbolic link, with local storage).
``FailureConfig(fail_fast=...)`` is the sweep's own ``fail_fast``: it must act on the
loop, before any other result is recorded.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from orchestrator.tune.result import SHOULD_CHECKPOINT
from orchestrator.tune.tune_trial import TuneTrial, tune_checkpoint

__all__ = ["TuneHooks"]

log = logging.getLogger("orchestrator.tune")


class TuneHooks:
    """See the module docstring."""

    def __init__(
        self,
        callbacks: Sequence[Any],
        *,
        experiment_path: str,
        local: bool,
        trainable_name: str,
        name_creator: Callable[[Any], str] | None,
        dirname_creator: Callable[[Any], str] | None,
        prefix: str = "",
    ) -> None:
        self.callbacks = list(callbacks)
        self._path = experiment_path
        self._local = local
        self._trainable = trainable_name
        self._name_creator = name_creator
        self._dirname_creator = dirname_creator
        #: Each trial's directory name from ``trial_dirname_creator`` (a link to it).
        self.dirnames: dict[str, str] = {}
        self._views: dict[str, TuneTrial] = {}
        self._lock = threading.Lock()
        self._iteration = 0
        self.loop: asyncio.AbstractEventLoop | None = None  # the run's (set by the Tuner)
        #: The first exception a callback raised: ``fit()`` raises it, as Tune's does,
        #: once ``abort`` (set by the Tuner; any thread) has ended the run, leaving the
        #: trials not finished to ``Tuner.restore``. No callback is called after it.
        self.failed: Exception | None = None
        self.abort: Callable[[], None] | None = None
        self._prefix = prefix  # the run's trials' ids start with it (the sweep's name)
        if not self.callbacks:  # no per-result hook call for nothing
            for name in ("on_trial_result", "on_checkpoint", "on_trial_restore"):
                setattr(self, name, None)
            for name in ("on_trial_complete", "on_experiment_end"):
                setattr(self, name, None)

    def view(self, trial: Any) -> TuneTrial:
        found = self._views.get(trial.id)
        if found is None:
            found = TuneTrial(trial, self._path, self._trainable, self._name_creator)
            self._views[trial.id] = found
        return found

    def _mine(self, trial: Any) -> bool:
        return str(trial.id).startswith(self._prefix)

    def _call(self, name: str, *args: Any, **kwargs: Any) -> None:
        for callback in self.callbacks:
            method = getattr(callback, name, None)
            if method is None or self.failed is not None:
                continue
            try:
                method(*args, **kwargs)
            except Exception as err:  # Tune's rule: a failing callback ends the run
                self.failed = err
                if self.abort is not None:
                    self.abort()

    def _trial_call(self, name: str, trial: Any, **kwargs: Any) -> None:
        if not self.callbacks or not self._mine(trial):
            return
        view = self.view(trial)
        with self._lock:
            trials = list(self._views.values())
            self._step(name, trials, trial=view, **kwargs)

    def _step(self, name: str, trials: list[TuneTrial], **kwargs: Any) -> None:
        """One of Tune's controller steps: the event's callbacks between the step's own."""
        self._call("on_step_begin", iteration=self._iteration, trials=trials)
        self._call(name, iteration=self._iteration, trials=trials, **kwargs)
        self._call("on_step_end", iteration=self._iteration, trials=trials)

    # -- trialflow's hooks -----------------------------------------------------------------

    def on_trial_start(self, trial: Any) -> None:
        if self._dirname_creator is not None and self._mine(trial):
            self._link(trial)
        self._trial_call("on_trial_start", trial)

    def on_trial_result(self, trial: Any, result: dict[str, Any]) -> None:
        if not self.callbacks or not self._mine(trial):
            return
        shown = {**result, "config": dict(trial.config)}
        with self._lock:
            self._iteration += 1
            trials = list(self._views.values())
            view = self.view(trial)
            self._step("on_trial_result", trials, trial=view, result=shown)
        if shown.get(SHOULD_CHECKPOINT) and self.loop is not None:
            # A callback asked for a checkpoint: the trial saves after its next result
            # (callbacks run beside the trials, so the step in flight comes first).
            asyncio.run_coroutine_threadsafe(trial.save(), self.loop).add_done_callback(
                lambda done: done.exception()  # a trial that ended meanwhile: nothing to do
            )

    def on_checkpoint(self, trial: Any, checkpoint: Any) -> None:
        self._trial_call("on_trial_save", trial)
        self._trial_call("on_checkpoint", trial, checkpoint=tune_checkpoint(checkpoint))

    def on_trial_restore(self, trial: Any, checkpoint: Any) -> None:
        self._trial_call("on_trial_restore", trial)

    def on_trial_error(self, trial: Any, error: BaseException) -> None:
        if not self._mine(trial):
            return
        final = getattr(trial.state, "value", "") == "ERROR"
        self._trial_call("on_trial_error" if final else "on_trial_recover", trial)

    def on_trial_complete(self, trial: Any) -> None:
        self._trial_call("on_trial_complete", trial)

    def on_experiment_end(self, trials: list[Any]) -> None:
        if not self.callbacks:
            return
        views = [self.view(t) for t in trials if self._mine(t)]
        with self._lock:
            self._call("on_experiment_end", trials=views)

    # -- trial_dirname_creator -----------------------------------------------------------------

    def _link(self, trial: Any) -> None:
        assert self._dirname_creator is not None
        name = str(self._dirname_creator(self.view(trial)))
        if not self._local or name == trial.id or not name or "/" in name:
            return
        link = os.path.join(self._path, name)
        try:
            os.makedirs(self._path, exist_ok=True)
            if not os.path.lexists(link):
                os.symlink(trial.id, link, target_is_directory=True)
            self.dirnames[trial.id] = name
        except OSError as err:  # a name in use, a filesystem without links: logged only
            log.warning("trial %s: could not name its directory %s: %s", trial.id, link, err)
