"""The bookkeeper: the machine's record-keeping actions, carried out on the loop.

The executor turns actions into Ray calls; this turns the others into what the loop
keeps and tells, with no Ray call anywhere: a result into the trial's history, the
journal and the hooks (``Report``), a rollback into a shorter history (``RunStarted``),
an exploit's config (``ApplyConfig``), a checkpoint deletion that must wait for the
journal (``DeleteCheckpoints``, ``ReleaseCheckpoint``), a hook call and a note for
``show`` (``Notify``), and the machine's timers: a stop's grace period (``ArmGrace``)
and a trial waiting for its result hooks (``WaitForHooks``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.core.events import (
    Action,
    ApplyConfig,
    ArmGrace,
    DeleteCheckpoints,
    GraceExpired,
    HooksCaughtUp,
    Notify,
    ReleaseCheckpoint,
    Report,
    RunStarted,
    WaitForHooks,
)
from orchestrator.core.results import ResultWarnings, clean_result

if TYPE_CHECKING:
    from orchestrator.core.events import Event
    from orchestrator.engine.collector import CheckpointCollector
    from orchestrator.engine.hooks import HookRunner
    from orchestrator.engine.ports import JournalPort
    from orchestrator.engine.trial_runtime import TrialRuntime

__all__ = ["Bookkeeper"]

log = logging.getLogger("orchestrator.engine.loop")


class Bookkeeper:
    """Carries out the record-keeping actions (see the module docstring). ``trials``
    is the loop's table of trials, ``notify`` queues an event of the loop's own, and
    ``loop`` gives the running event loop (for timers)."""

    def __init__(
        self,
        *,
        trials: Mapping[str, TrialRuntime],
        notify: Callable[[TrialRuntime, Event], None],
        loop: Callable[[], asyncio.AbstractEventLoop],
        hooks: HookRunner,
        collector: CheckpointCollector,
        journal: JournalPort | None,
    ) -> None:
        self._trials = trials
        self._notify_loop = notify
        self._loop = loop
        self._hooks = hooks
        hooks.watch_results(self._hooks_saw)
        # Trials whose training waits for their result hooks: the count they wait for.
        self._hook_waits: dict[str, int] = {}
        self._collector = collector
        self._journal = journal
        self._result_warnings = ResultWarnings()

    def handles(self, action: Action) -> bool:
        return type(action) in _ACTIONS

    def execute(self, rt: TrialRuntime, action: Action) -> None:
        _ACTIONS[type(action)](self, rt, action)

    def _report(self, rt: TrialRuntime, action: Report) -> None:
        result = action.result  # a fresh dict the machine built for this result
        assert isinstance(result, dict)
        clean_result(result, self._result_warnings.for_trial(rt.id))
        if rt.report_config:
            result["config"] = rt.config
        rt.results.append(result)
        rt.last_result = result
        if self._journal is not None:
            self._journal.record_result(rt, result)
        if self._hooks.wants("on_trial_result"):
            self._hooks.emit(rt.id, "on_trial_result", rt.handle, result)
        if rt.observer is not None:
            rt.observer.on_result(rt, result)

    def _arm_grace(self, rt: TrialRuntime, action: ArmGrace) -> None:
        expired = GraceExpired(action.generation, action.token)
        self._loop().call_later(action.seconds, self._notify_loop, rt, expired)

    def _wait_for_hooks(self, rt: TrialRuntime, action: WaitForHooks) -> None:
        seen = self._hooks.results_seen(rt.id)
        if seen >= action.seen:
            self._notify_loop(rt, HooksCaughtUp(seen))
        else:
            self._hook_waits[rt.id] = action.seen

    def _hooks_saw(self, key: str, seen: int) -> None:
        wanted = self._hook_waits.get(key)
        if wanted is None or seen < wanted:
            return
        del self._hook_waits[key]
        rt = self._trials.get(key)
        if rt is not None:
            self._notify_loop(rt, HooksCaughtUp(seen))

    def _run_started(self, rt: TrialRuntime, action: RunStarted) -> None:
        rt.runs_started += 1
        keep = action.iteration
        results = rt.results
        if results and results[-1].get("training_iteration", 0) > keep:
            cut = len(results)
            while cut and results[cut - 1].get("training_iteration", 0) > keep:
                cut -= 1
            dropped = len(results) - cut
            del results[cut:]
            if self._journal is not None:
                self._journal.truncate(rt, cut)
            rt.discarded_results += dropped
            log.info(
                "trial %s: continuing from iteration %d; discarded %d later result(s) of "
                "the abandoned run",
                rt.id,
                keep,
                dropped,
            )
        rt.last_result = results[-1] if results else None

    def _apply_config(self, rt: TrialRuntime, action: ApplyConfig) -> None:
        rt.set_config(action.config)

    def _delete_checkpoints(self, rt: TrialRuntime, action: DeleteCheckpoints) -> None:
        if self._journal is None:
            self._collector.submit(action.checkpoints)
            return
        # Not before the journal lists their successors: a resumed driver uses only the
        # checkpoints its journal names.
        delete = functools.partial(self._collector.submit, action.checkpoints)
        self._journal.after_next_write(delete)

    def _release_checkpoint(self, rt: TrialRuntime, action: ReleaseCheckpoint) -> None:
        ckpt = action.checkpoint
        owner = self._trials.get(ckpt.trial_id)
        if owner is None or (owner is not rt and owner.machine.keeps(ckpt.key)):
            return  # not this experiment's, or still on its owner's timeline
        # Its owner dropped it while this trial's timeline started from it; the
        # collector still waits while another trial's does (pins).
        self._delete_checkpoints(rt, DeleteCheckpoints((ckpt,)))

    def _notify(self, rt: TrialRuntime, action: Notify) -> None:
        if action.hook == "on_trial_error":
            (error,) = action.args
            if rt.machine.storage_down:  # a checkpoint that cannot be stored: no failure
                log.warning("%s", error)
            else:
                log.warning("%s (failure %d)", error, rt.machine.num_failures)
            rt.note("failure", rt.machine.iteration)
        elif action.hook == "on_trial_restore":
            rt.note("restore", action.args[0].iteration)
        self._hooks.emit(rt.id, action.hook, rt.handle, *action.args)


_ACTIONS: dict[type[Action], Callable[[Bookkeeper, TrialRuntime, Any], None]] = {
    Report: Bookkeeper._report,
    RunStarted: Bookkeeper._run_started,
    ApplyConfig: Bookkeeper._apply_config,
    DeleteCheckpoints: Bookkeeper._delete_checkpoints,
    ReleaseCheckpoint: Bookkeeper._release_checkpoint,
    Notify: Bookkeeper._notify,
    ArmGrace: Bookkeeper._arm_grace,
    WaitForHooks: Bookkeeper._wait_for_hooks,
}
