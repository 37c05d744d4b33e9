"""Adoption on resume: a journaled trial rebuilt as the loop's record, as it should
continue after a driver restart (reading the journal is :mod:`orchestrator.journal`;
matching it to the script's calls, :mod:`orchestrator.api.resumption`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from orchestrator.core.identity import (
    journaled_identity,
)
from orchestrator.core.machine import TrialMachine, TrialState
from orchestrator.core.settings import ExperimentSettings
from orchestrator.core.spec import TrialSpec, policy_for
from orchestrator.engine.trial_runtime import TrialRuntime
from orchestrator.errors import TrialError

if TYPE_CHECKING:
    from orchestrator.core.journal_format import JournaledTrial
    from orchestrator.core.machine import HookProgressView

log = logging.getLogger("orchestrator")


def adopt(
    entry: JournaledTrial,
    settings: ExperimentSettings,
    *,
    spec: TrialSpec | None = None,
    hook_progress: HookProgressView | None = None,
) -> TrialRuntime:
    """Rebuild a journaled trial as it should continue after a driver restart.

    A trial that will not run (TERMINATED, PAUSED, or ERROR when not retried) is rebuilt
    without its code, so its module need not be importable here; its code is loaded if
    it is ever started again. The others continue from their newest checkpoint that
    survived; their later results are gone. ``spec`` is the spec of the call adopting
    a trial whose journaled spec was lost (rebuilt by ``repair``): it continues with
    that spec from its newest checkpoint (or is TERMINATED, when its last result meets
    that spec's stop criterion). Its policy is built here, once, reading its hooks'
    progress from ``hook_progress``; a sweep that continues it gives it its judge when
    its call claims it (``Experiment.rejudge``)."""
    from orchestrator.core.codec import unpickle_b64

    state = TrialState(entry.state)
    lost = bool(entry.spec.get("spec_lost"))
    if lost and spec is not None:  # its journaled state is unknown: its results say
        done = bool(entry.results) and spec.stop(entry.results[-1])
        state = TrialState.TERMINATED if done else TrialState.PENDING
    elif state is TrialState.ERROR and settings.continuation.resume_errored and not lost:
        state = TrialState.PENDING
    elif lost and settings.continuation.resume_errored:
        log.warning(
            "trial %s lost its spec with the journal's head and cannot be retried on its "
            "own: add_trial(..., trial_id=%r) with its trainable and config continues it",
            entry.id,
            entry.id,
        )
    elif state is TrialState.PAUSED and entry.save_failed:
        log.warning(
            "trial %s was paused because a checkpoint could not be stored; resuming it from "
            "its newest stored checkpoint (it was: %s)",
            entry.id,
            (entry.error or "no error recorded").removeprefix(f"trial {entry.id}: "),
        )
        state = TrialState.PENDING
    runs = not state.is_settled
    supplied = spec is not None  # by the call: its code is loaded
    if spec is not None:
        named = journaled_identity(entry.id, entry.spec).named  # as it was created
        spec = replace(spec, trial_id=entry.id, named=named, json=None)
    else:
        spec = TrialSpec.from_json(entry.id, entry.spec, load_code=runs)
    error = None
    if state is TrialState.ERROR and entry.error:
        error = TrialError(entry.id, f"(before the driver restarted) {entry.error}")
    results = entry.results
    checkpoints = list(entry.checkpoints)
    origin, num_failures = entry.origin, entry.num_failures
    if (
        TrialState(entry.state) is TrialState.ERROR
        and settings.continuation.resume_errored == "restart"
    ):
        # Retried from scratch: its checkpoints are left (never restored) and its
        # results and failures start again.
        checkpoints, origin, num_failures = [], None, 0
    if state is TrialState.TERMINATED or state is TrialState.ERROR:
        iteration = results[-1]["training_iteration"] if results else 0
    else:
        timeline = ([origin] if origin is not None else []) + checkpoints
        iteration = timeline[-1].iteration if timeline else 0
        results = [r for r in results if r["training_iteration"] <= iteration]
    policy = policy_for(spec, settings, hook_progress=hook_progress)
    machine = TrialMachine.resumed(
        entry.id,
        policy,
        state=state,
        checkpoints=checkpoints,
        num_failures=num_failures,
        iteration=iteration,
        error=error,
        origin=origin,
    )
    rt = TrialRuntime(spec, policy, machine=machine, code_loaded=runs or supplied)
    rt.stored_keys = entry.stored_keys
    if entry.config_pickle is not None:  # an exploit gave it a new config
        try:
            rt.config = dict(unpickle_b64(entry.config_pickle))
            rt.config_pickle = entry.config_pickle
        except Exception:
            if runs:
                raise
    rt.results = list(results)
    rt.last_result = results[-1] if results else None
    rt.events = list(entry.events)
    log.info("resumed trial %s (%s, iteration %d)", entry.id, state.value, iteration)
    return rt


def off_timeline_keys(trials: Iterable[TrialRuntime]) -> list[tuple[str, str]]:
    """``(trial id, key)`` of each checkpoint a resumed trial's storage holds that no
    trial's timeline lists: an abandoned run's whose deletion the previous driver did
    not finish, or one saved after its last journal write (the trial goes on from an
    older one, so that run is abandoned too). Nothing will ever restore them."""
    trials = list(trials)
    listed = {c.key for rt in trials for c in rt.machine.timeline}
    return [(rt.id, key) for rt in trials for key in sorted(rt.stored_keys - listed)]
