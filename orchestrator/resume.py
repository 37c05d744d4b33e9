"""Opening an experiment's storage: refuse, resume or overwrite; rebuild journaled
trials; and the garbage collector's delete, which follows where checkpoints are.

Kept out of ``orchestrator.py`` so that the context manager reads as the order of
events: check what storage holds, start Ray, open storage, adopt journaled trials,
start the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from .errors import TrialError
from .lifecycle import TrialMachine, TrialState
from .runtime import TrialRuntime
from .spec import ExperimentSettings, StorageMode, TrialSpec, policy_for

if TYPE_CHECKING:
    from .checkpoints import Checkpoint
    from .journal import JournaledTrial

log = logging.getLogger("orchestrator")


async def check_existing(
    uri: str, options: Mapping[str, Any], settings: ExperimentSettings, mode: StorageMode
) -> None:
    """Refuse to open an existing experiment without ``resume`` (or to resume a missing
    one), before Ray starts; with ``overwrite``, delete the old one."""
    import storage as storage_pkg

    from .existing import delete_all, find, refuse_or_accept

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
        if refuse_or_accept(
            found,
            uri=uri,
            name=settings.name,
            resume=settings.resume,
            overwrite=settings.overwrite,
        ):
            await delete_all(store, store.uri if mode.is_local else None)
    finally:
        await store.aclose()


async def adopt_journaled(
    store: Any, settings: ExperimentSettings, known: set[str]
) -> list[TrialRuntime]:
    """The journaled trials (except ``known`` ones), rebuilt to continue.

    Says what happens to paused trials, which would otherwise make ``run()`` return at
    once without a word: one paused because a checkpoint could not be stored (a full
    disk, storage down) is resumed, since the pause was forced on it and the fix (freeing
    space, say) is usually why the experiment is resumed; one paused on request (by the
    user or a scheduler) stays paused."""
    from .journal import load as load_journal

    entries = [e for e in await load_journal(store) or [] if e.id not in known]
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
    return [adopt(entry, settings) for entry in entries]


def adopt(entry: JournaledTrial, settings: ExperimentSettings) -> TrialRuntime:
    """Rebuild a journaled trial as it should continue after a driver restart.

    A trial that will not run (TERMINATED, PAUSED, or ERROR when not retried) is rebuilt
    without its code, so its module need not be importable here; its code is loaded if
    it is ever started again. The others continue from their newest checkpoint that
    survived; their later results are gone."""
    from .journal import unpickle_b64

    state = TrialState(entry.state)
    if state is TrialState.ERROR and settings.resume_errored:
        state = TrialState.PENDING
    if state is TrialState.PAUSED and entry.save_failed:
        log.warning(
            "trial %s was paused because a checkpoint could not be stored; resuming it from "
            "its newest stored checkpoint (it was: %s)",
            entry.id,
            (entry.error or "no error recorded").removeprefix(f"trial {entry.id}: "),
        )
        state = TrialState.PENDING
    runs = not state.is_settled
    spec = TrialSpec.from_json(entry.id, entry.spec, load_code=runs)
    error = None
    if state is TrialState.ERROR and entry.error:
        error = TrialError(entry.id, f"(before the driver restarted) {entry.error}")
    results = entry.results
    newest = [c for c in entry.checkpoints]
    if state is TrialState.TERMINATED or state is TrialState.ERROR:
        iteration = results[-1]["training_iteration"] if results else 0
    else:
        latest = newest[-1] if newest else None
        iteration = latest.iteration if latest is not None else 0
        results = [r for r in results if r["training_iteration"] <= iteration]
    policy = policy_for(spec, settings)
    machine = TrialMachine.resumed(
        entry.id,
        policy,
        state=state,
        checkpoints=newest,
        num_failures=entry.num_failures,
        iteration=iteration,
        error=error,
    )
    rt = TrialRuntime(spec, policy, machine=machine, code_loaded=runs)
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
        from .locality import is_visible
        from .node_local import delete_where_visible

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
