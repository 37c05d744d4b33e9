"""Opening an experiment's storage: refuse, resume or overwrite; rebuild journaled
trials, each adopted by the ``add_trial`` call that names it; and the garbage
collector's delete, which follows where checkpoints are.

Kept out of ``orchestrator.py`` so that the context manager reads as the order of
events: check what storage holds (and read a resumed journal), start Ray, open
storage, adopt journaled trials, start the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from orchestrator.api.identity import (
    TrialMatcher,
    journaled_identity,
    spec_identity,
    warn_new_trial,
)
from orchestrator.core.machine import TrialMachine, TrialState
from orchestrator.core.spec import ExperimentSettings, StorageMode, TrialSpec, policy_for
from orchestrator.engine.record import TrialRuntime
from orchestrator.errors import ConfigError, TrialError

if TYPE_CHECKING:
    from orchestrator.api.orchestrator import Orchestrator
    from orchestrator.core.checkpoints import Checkpoint
    from orchestrator.core.journal_format import JournaledTrial
    from orchestrator.journal.reader import JournalContents

log = logging.getLogger("orchestrator")


async def check_existing(
    uri: str, options: Mapping[str, Any], settings: ExperimentSettings, mode: StorageMode
) -> JournalContents | None:
    """Before Ray starts: check the storage arguments, refuse to open an existing
    experiment without ``resume`` (or to resume a missing one), and with ``overwrite``
    delete the old one. With ``resume``, the journal read back (a damaged one raises
    :class:`~orchestrator.errors.JournalDamaged` here, before Ray starts)."""
    import storage as storage_pkg
    from orchestrator.api.storage_check import check_local_path
    from orchestrator.journal.existing import delete_all, find, refuse_or_accept
    from orchestrator.journal.reader import load_experiment

    options = dict(options)
    if mode.is_local:
        options["create"] = False  # looking must create nothing
    store = storage_pkg.open_storage(uri, **options)
    try:
        try:
            await store.open()
        except storage_pkg.BucketNotFound:
            if not mode.is_local:
                raise
            found = None  # no directory: no experiment
        else:
            found = await find(store)
        if mode.is_local:
            await asyncio.to_thread(check_local_path, store.uri, settings.name)
        if refuse_or_accept(
            found,
            uri=uri,
            name=settings.name,
            resume=settings.resume,
            overwrite=settings.overwrite,
        ):
            await delete_all(store, store.uri if mode.is_local else None)
        if settings.resume:
            return await load_experiment(store)
        return None
    finally:
        await store.aclose()


@dataclass
class Resumption:
    """While a resumed experiment is open: which journaled trial each ``add_trial``
    call adopts (:mod:`orchestrator.api.identity`), and the journaled trials whose spec was
    lost (rebuilt by ``repair``), which the call that names them supplies."""

    matcher: TrialMatcher
    spec_lost: dict[str, JournaledTrial] = field(default_factory=dict)


def adopt_experiment(orch: Orchestrator, contents: JournalContents) -> Resumption:
    """Put the journaled trials into ``orch``, in the journal's order, each rebuilt to
    continue; a trial added before entering adopts its journaled trial (its handle
    then shows the resumed trial), and the others are new trials, after them."""
    swept = {
        trial_id
        for doc in contents.extras.get("sweeps") or []
        if isinstance(doc, Mapping)
        for trial_id in doc.get("created") or []
    }
    matcher = TrialMatcher(
        journaled_identity(e.id, e.spec, swept=e.id in swept) for e in contents.trials
    )
    journaled = {e.id for e in contents.trials}
    _say_paused(contents.trials)
    calls: dict[str, TrialRuntime] = {}
    new: list[TrialRuntime] = []
    for rt in orch._trials.values():  # added before entering, in the order of the calls
        identity = spec_identity(rt.spec)
        # A trial of this object's previous session has its journaled id: itself.
        by_id = rt.spec.named or rt.id in journaled
        found = matcher.match(identity, rt.id if by_id else None)
        if found is None:
            warn_new_trial(matcher, rt.id, identity)
            new.append(rt)
        else:
            calls[found] = rt
    resumption = Resumption(matcher)
    trials: dict[str, TrialRuntime] = {}
    for entry in contents.trials:
        call = calls.get(entry.id)
        lost = bool(entry.spec.get("spec_lost"))
        rt = adopt(entry, orch.settings, spec=call.spec if call is not None and lost else None)
        if call is not None:
            if not lost:
                warn_changed_options(entry.id, rt.spec, call.spec)
            rt.handle = call.handle
            rt.handle._view(rt)
        elif lost:
            resumption.spec_lost[entry.id] = entry
        trials[entry.id] = rt
    for rt in new:
        if rt.id in trials:
            raise ConfigError(
                f"trial {rt.id}: the journal holds another trial of that id; give this "
                "add_trial call another trial_id"
            )
        trials[rt.id] = rt
    orch._trials.clear()
    orch._trials.update(trials)
    return resumption


def claim(orch: Orchestrator, resumption: Resumption, spec: TrialSpec) -> TrialRuntime | None:
    """The journaled trial an ``add_trial`` call of the open, resumed experiment
    adopts (None: the call adds a new trial, which has been said)."""
    identity = spec_identity(spec)
    found = resumption.matcher.match(identity, spec.trial_id if spec.named else None)
    if found is None:
        warn_new_trial(resumption.matcher, spec.trial_id, identity)
        return None
    entry = resumption.spec_lost.pop(found, None)
    if entry is None:
        rt = orch._trials[found]
        warn_changed_options(found, rt.spec, spec)
        return rt
    rt = adopt(entry, orch.settings, spec=spec)  # the call supplies the spec it lost
    orch._trials[found] = rt
    return rt


#: The options ``warn_changed_options`` compares (the stop criterion besides).
_OPTIONS = (
    "checkpoint_every",
    "resources",
    "max_failures",
    "keep_checkpoints",
    "checkpoint_score",
    "result_buffer",
)


def warn_changed_options(trial_id: str, journaled: TrialSpec, call: TrialSpec) -> None:
    """A resumed trial keeps the options it was journaled with: say which of the
    adopting call's differ (they are not applied)."""
    changed = [
        name
        for name in _OPTIONS
        if _comparable(getattr(journaled, name)) != _comparable(getattr(call, name))
    ]
    old, new = journaled.stop, call.stop
    if old.predicate is None and new.predicate is None and old.thresholds != new.thresholds:
        changed.append("stop")
    if changed:
        log.warning(
            "resume: trial %s keeps its journaled %s; this add_trial call's differ and are "
            "not applied (to run with them, add a new trial: another config or trial_id)",
            trial_id,
            ", ".join(changed),
        )


def _say_paused(entries: Iterable[JournaledTrial]) -> None:
    """Say what happens to paused trials, which would otherwise make ``run()`` return at
    once without a word: one paused because a checkpoint could not be stored (a full
    disk, storage down) is resumed (see :func:`adopt`), since the pause was forced on it
    and the fix (freeing space, say) is usually why the experiment is resumed; one
    paused on request (by the user or a scheduler) stays paused."""
    staying = [e.id for e in entries if e.state == TrialState.PAUSED.value and not e.save_failed]
    if staying:
        shown = ", ".join(staying[:5]) + (
            f" and {len(staying) - 5} more" if len(staying) > 5 else ""
        )
        log.warning(
            "%d trial(s) were paused on request and stay paused: %s; `await trial.resume()` "
            "continues one (a sweep resumes its own when its call continues)",
            len(staying),
            shown,
        )


def _comparable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    return tuple(value) if isinstance(value, (list, tuple)) else value


def adopt(
    entry: JournaledTrial, settings: ExperimentSettings, *, spec: TrialSpec | None = None
) -> TrialRuntime:
    """Rebuild a journaled trial as it should continue after a driver restart.

    A trial that will not run (TERMINATED, PAUSED, or ERROR when not retried) is rebuilt
    without its code, so its module need not be importable here; its code is loaded if
    it is ever started again. The others continue from their newest checkpoint that
    survived; their later results are gone. ``spec`` is the spec of the call adopting
    a trial whose journaled spec was lost (rebuilt by ``repair``): it continues with
    that spec from its newest checkpoint (or is TERMINATED, when its last result meets
    that spec's stop criterion)."""
    from orchestrator.core.codec import unpickle_b64

    state = TrialState(entry.state)
    lost = bool(entry.spec.get("spec_lost"))
    if lost and spec is not None:  # its journaled state is unknown: its results say
        done = bool(entry.results) and spec.stop(entry.results[-1])
        state = TrialState.TERMINATED if done else TrialState.PENDING
    elif state is TrialState.ERROR and settings.resume_errored and not lost:
        state = TrialState.PENDING
    elif lost and settings.resume_errored:
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
    if state is TrialState.TERMINATED or state is TrialState.ERROR:
        iteration = results[-1]["training_iteration"] if results else 0
    else:
        timeline = ([entry.origin] if entry.origin is not None else []) + checkpoints
        iteration = timeline[-1].iteration if timeline else 0
        results = [r for r in results if r["training_iteration"] <= iteration]
    policy = policy_for(spec, settings)
    machine = TrialMachine.resumed(
        entry.id,
        policy,
        state=state,
        checkpoints=checkpoints,
        num_failures=entry.num_failures,
        iteration=iteration,
        error=error,
        origin=entry.origin,
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


def delete_where_visible_fn(
    store: Any, mode: StorageMode
) -> Callable[[Checkpoint], Awaitable[None]]:
    """The collector's delete: with local storage the nodes may not share, a checkpoint
    is deleted where it is visible (here, or on a live node that sees it), and one that
    no live node sees is dropped with one log line (there is nothing a retry could do)."""
    root = store.uri

    async def delete(ckpt: Checkpoint) -> None:
        if mode is not StorageMode.LOCAL or ckpt.path is None:
            await store.delete_checkpoint(ckpt.key)
            return
        from orchestrator.actor.locality import is_visible
        from orchestrator.engine.node_local import delete_where_visible

        manifest = dict(ckpt.manifest) if ckpt.manifest is not None else None
        if await asyncio.to_thread(is_visible, ckpt.path, manifest):
            await store.delete_checkpoint(ckpt.key)
        elif not await delete_where_visible(root, ckpt):
            log.info(
                "trial %s: checkpoint %s is visible from no live node; dropped from the "
                "books (delete it by hand if a disk that holds it comes back)",
                ckpt.trial_id,
                ckpt.uri,
            )

    return delete
