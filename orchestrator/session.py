"""What an entered :class:`~orchestrator.Orchestrator` holds open, and the one order in
which it is opened and closed.

Opening: check the experiment's identity in storage (before Ray is touched, so a name
clash costs nothing), connect to Ray, open the storage, adopt a resumed experiment's
journaled trials, then start the journal, the hook runner (with the built-in loggers and
progress display) and the dispatcher loop. Closing runs the other way round, and every
step runs even when one before it failed: the loop stops first so nothing new starts,
the journal's last write lands before storage closes, pending checkpoint deletions get a
bounded drain, and Ray, if this session started it, is shut down last.

Kept apart from ``orchestrator.py`` so that module is the public surface (settings,
``add_trial``, ``run``, ``sweep``) and this one the plumbing behind ``async with``.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import storage as storage_pkg

    from .collector import CheckpointCollector
    from .hooks import HookRunner
    from .journal import Journal
    from .loop import Dispatcher
    from .orchestrator import Orchestrator
    from .resume import Resumption
    from .runtime import TrialRuntime

__all__ = ["Session", "open_session"]

log = logging.getLogger("orchestrator")

#: Seconds the checkpoint deletions still queued at exit may take before they are dropped.
DRAIN_DELETIONS_S = 30.0


@dataclass
class Session:
    """The resources of one ``async with`` block; :meth:`aclose` releases them all."""

    storage: storage_pkg.Storage
    journal: Journal
    hooks: HookRunner
    dispatcher: Dispatcher
    collector: CheckpointCollector
    builtins: list[Any] = field(default_factory=list)  # the logger, the progress display
    owns_ray: bool = False
    loop_handler: Any = None  # the event loop's exception handler before ours
    resumption: Resumption | None = None  # resume=True: how add_trial calls adopt trials

    async def aclose(self) -> None:
        try:
            await self.dispatcher.aclose()
            await self.journal.aclose()
            try:
                await asyncio.wait_for(self.collector.drain(), timeout=DRAIN_DELETIONS_S)
            except asyncio.TimeoutError:
                log.warning("checkpoint deletions still pending at exit were abandoned")
            await self.collector.aclose()
            for builtin in self.builtins:
                try:
                    await builtin.aclose()
                except Exception:  # their files are best effort; the run is done
                    log.exception("closing %s failed", type(builtin).__name__)
            await self.hooks.aclose()
            await self.storage.aclose()
            asyncio.get_running_loop().set_exception_handler(self.loop_handler)
        finally:
            release_ray(self.owns_ray)


def release_ray(owned: bool) -> None:
    """Shut Ray down if this session started it (never a cluster it joined or found)."""
    import ray

    if owned and ray.is_initialized():
        ray.shutdown()


async def open_session(orch: Orchestrator) -> Session:
    """Open everything ``orch`` needs to run trials; on failure, release what was opened."""
    import storage as storage_pkg

    from .collector import CheckpointCollector
    from .hooks import HookRunner
    from .journal import Journal
    from .loop import Dispatcher
    from .raystart import ensure_ray
    from .resume import adopt_experiment, check_existing, delete_where_visible_fn

    settings, mode = orch.settings, orch.storage_mode
    journaled = await check_existing(orch.storage_uri, orch._storage_options, settings, mode)
    resumption = adopt_experiment(orch, journaled) if journaled is not None else None
    owns_ray = ensure_ray(
        orch._ray_address, num_cpus=orch._num_cpus, log_to_driver=orch._log_to_driver
    )
    try:
        store = storage_pkg.open_storage(orch.storage_uri, **orch._storage_options)
        await store.open()
    except Exception:
        release_ray(owns_ray)
        raise
    loop = asyncio.get_running_loop()
    loop_handler = loop.get_exception_handler()
    try:
        started_at: float | None = None
        if journaled is not None:
            extras = journaled.extras
            orch._journaled_sweeps = {d["name"]: d for d in extras.get("sweeps", [])}
            started_at = extras.get("started_at")
        loop_handler = storage_pkg.quiet_sdk_noise(loop)
        journal = Journal(store, name=orch.name, interval=settings.journal_interval)
        if started_at is not None:
            journal.started_at = float(started_at)
        journal.set_extras(orch._journal_extras)
        builtins = _builtin_hooks(orch, store)
        hooks = HookRunner([*orch._hooks_list, *builtins], slow_after=settings.hook_slow_after)
        collector = CheckpointCollector(
            store,
            is_pinned=lambda key: dispatcher.is_pinned(key),
            delete=delete_where_visible_fn(store, mode),
        )
        dispatcher = Dispatcher(
            storage_uri=orch.storage_uri,
            storage_options=orch._storage_options,
            storage_mode=mode,
            uri_for=lambda key: _checkpoint_uri(store, key, mode.is_local),
            local_path_for=lambda key: store.uri_for(key) if mode.is_local else None,
            hooks=hooks,
            collector=collector,
            save_retry_for=settings.save_retry_for,
            journal=journal,
            runtime_env=orch._runtime_env,
            trials_per_worker=settings.trials_per_worker,
            spare_actors=settings.spare_actors,
            stop_grace_s=settings.stop_grace_s,
        )
    except BaseException:  # one way back for any failure between opening and running
        loop.set_exception_handler(loop_handler)
        await store.aclose()
        release_ray(owns_ray)
        raise
    dispatcher.start()
    for rt in orch._trials.values():
        dispatcher.attach(rt)
    _delete_off_timeline(store, collector, orch._trials.values(), mode.is_local)
    journal.start()
    return Session(
        store, journal, hooks, dispatcher, collector, builtins, owns_ray, loop_handler, resumption
    )


def _delete_off_timeline(
    store: storage_pkg.Storage,
    collector: CheckpointCollector,
    trials: Iterable[TrialRuntime],
    local: bool,
) -> None:
    """A resumed experiment's checkpoints that no timeline lists go, as a rollback's do."""
    from .checkpoints import Checkpoint
    from .resume import off_timeline_keys

    doomed = tuple(
        Checkpoint(trial_id, -1, key, _checkpoint_uri(store, key, local))
        for trial_id, key in off_timeline_keys(trials)
    )
    if doomed:
        log.info(
            "deleting %d checkpoint(s) that no trial's timeline holds (an abandoned run's, "
            "or saved after the previous driver's last journal write)",
            len(doomed),
        )
        collector.submit(doomed)


def _checkpoint_uri(store: storage_pkg.Storage, key: str, local: bool) -> str:
    where = store.uri_for(key)
    return "file://" + where if local else where


def _builtin_hooks(orch: Orchestrator, store: storage_pkg.Storage) -> list[Any]:
    """The per-trial logs and the live progress display (both hooks, inline); they are
    ``orch._logger`` and ``orch.progress`` while the session is open."""
    hooks: list[Any] = []
    if orch._logger_names:
        from .loggers import ExperimentLogger

        if orch.storage_mode.is_local:  # beside the checkpoints, in the experiment
            orch._logger = ExperimentLogger(store.uri, loggers=orch._logger_names)
        else:  # on the driver's disk, uploaded in the background
            logdir = tempfile.mkdtemp(prefix=f"trialflow-logs-{orch.name}-")
            orch._logger = ExperimentLogger(logdir, storage=store, loggers=orch._logger_names)
        hooks.append(orch._logger)
    if orch._progress_on:
        from .progress import ProgressReporter

        orch.progress = ProgressReporter()
        hooks.append(orch.progress)
    return hooks
