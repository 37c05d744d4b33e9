"""How far each trial's result hooks have got: the object a trial's policy reads it from.

A trial's policy is built once, when the trial is added or adopted, often before the
experiment is entered and its hook runner exists. So the policy holds this stable object
of the experiment's instead, which the session binds to its hook runner while the
experiment is entered (a new runner on each entry). Sans-IO: it only forwards a count.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["HookProgress", "ResultHooks"]


class ResultHooks(Protocol):
    """What a hook runner tells about result hooks (``engine.hooks.HookRunner``)."""

    def queues(self, name: str) -> bool: ...

    def results_seen(self, key: str) -> int: ...


class HookProgress:
    """How many of a trial's results its queued (user's) ``on_trial_result`` hooks have
    processed, while bound to a runner that has such hooks (see the module docstring).
    Satisfies :class:`~orchestrator.core.machine.HookProgressView`."""

    __slots__ = ("_runner",)

    def __init__(self) -> None:
        self._runner: ResultHooks | None = None

    def bind(self, runner: ResultHooks | None) -> None:
        """Read from ``runner`` from now on (None: the experiment was left). Only queued
        result hooks pace a trial: inline ones (the built-in loggers) never lag."""
        paced = runner is not None and runner.queues("on_trial_result")
        self._runner = runner if paced else None

    def seen(self, trial_id: str) -> int | None:
        runner = self._runner
        return None if runner is None else runner.results_seen(trial_id)
