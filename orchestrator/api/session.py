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
``add_trial``, ``run``, ``sweep``) and this one the plumbing behind ``async with``. It
works on the :class:`~orchestrator.api.experiment.Experiment`: the parts it opens are
set there on entry and cleared on exit, and journaled trials are adopted into it.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.timeouts import within

if TYPE_CHECKING:
    import storage as storage_pkg
    from orchestrator.api.experiment import Experiment
    from orchestrator.api.interrupts import Interrupts
    from orchestrator.api.lease import ExperimentLease
    from orchestrator.api.resumption import Resumption
    from orchestrator.engine.collector import CheckpointCollector
    from orchestrator.engine.hooks import HookRunner
    from orchestrator.engine.loop import Dispatcher
    from orchestrator.engine.trial_runtime import TrialRuntime
    from orchestrator.journal.reader import JournalContents
    from orchestrator.journal.writer import Journal

__all__ = ["Opened", "Session", "enter", "open_session"]

log = logging.getLogger("orchestrator")

#: Seconds the checkpoint deletions still queued at exit may take before they are dropped.
DRAIN_DELETIONS_S = 30.0


@dataclass
class Session:
    """The resources of one ``async with`` block; :meth:`aclose` releases them all."""

    experiment: Experiment
    storage: storage_pkg.Storage
    journal: Journal
    hooks: HookRunner
    dispatcher: Dispatcher
    collector: CheckpointCollector
    builtins: list[Any] = field(default_factory=list)  # the logger, the progress display
    owns_ray: bool = False
    loop_handler: Any = None  # the event loop's exception handler before ours
    abandoned: list[str] = field(default_factory=list)  # hooks still running at close

    async def aclose(self) -> None:
        exp = self.experiment
        try:
            await self.dispatcher.aclose()
            await self.journal.aclose()
            try:
                await within(DRAIN_DELETIONS_S, self.collector.drain())
            except TimeoutError:
                log.warning("checkpoint deletions still pending at exit were abandoned")
            await self.collector.aclose()
            for builtin in self.builtins:
                try:
                    await builtin.aclose()
                except Exception:  # their files are best effort; the run is done
                    log.exception("closing %s failed", type(builtin).__name__)
            self.abandoned = await self.hooks.aclose()
            await self.storage.aclose()
            asyncio.get_running_loop().set_exception_handler(self.loop_handler)
        finally:
            exp.hook_progress.bind(None)
            exp.dispatcher = exp.hooks = exp.journal = exp.resumption = exp.preview = None
            exp.logger = exp.progress = None
            release_ray(self.owns_ray)


@dataclass
class Opened:
    """An entered ``Orchestrator``: its session, the experiment's lease, and the signal
    handlers (if it took them); :meth:`close` ends all three in order."""

    experiment: Experiment
    session: Session
    lease: ExperimentLease
    interrupts: Interrupts | None

    async def close(self, exc: BaseException | None) -> None:
        """Close the session, then give the lease back and the signals; then say why the
        block ended when it was a signal (raised) or a lost lease (raised if nothing
        else is being raised)."""
        lease, interrupts = self.lease, self.interrupts
        if interrupts is not None:
            interrupts.closing = True
            interrupts.ours(exc)
        try:
            await self.session.aclose()
        except asyncio.CancelledError:
            if interrupts is None or not interrupts.forced:
                raise
        finally:
            await lease.release()
            if interrupts is not None:
                interrupts.release()
        if interrupts is not None:
            ending = interrupts.ending(
                self.experiment.storage_uri, self.experiment.name, self.session.abandoned
            )
            if ending is not None:
                raise ending from None
        if lease.lost is not None and exc is None:
            raise lease.lost  # lost while no run() was waiting: say so


async def enter(exp: Experiment) -> Opened:
    """Check that a local storage path can hold the experiment, take the experiment's
    lease (before Ray: a second driver is refused at once),
    take SIGINT/SIGTERM (before Ray's start, so a signal while Ray starts still ends the
    driver cleanly: Ray shut down, the lease given back), open the session, and let
    nothing write to the experiment without the lease. The driver's large C blocks get
    pages of their own from then on (``engine/c_heap.py``: its RSS stays flat)."""
    import storage as storage_pkg
    from orchestrator.api.interrupts import Interrupts
    from orchestrator.api.lease import acquire_lease
    from orchestrator.engine.c_heap import keep_large_blocks_apart
    from orchestrator.journal.storage_check import check_local_path

    keep_large_blocks_apart()

    if exp.storage_mode.is_local:  # a path that cannot hold it: said before anything
        path = storage_pkg.open_storage(exp.storage_uri, **exp.opening.storage_options).uri
        await asyncio.to_thread(check_local_path, path, exp.name)
    await asyncio.to_thread(_import_the_engine)  # before the lease: see there
    lease = await acquire_lease(exp)
    interrupts = Interrupts.catch()  # before Ray's start: it runs in a thread and takes none
    try:
        session = await open_session(exp)
    except BaseException as exc:
        await lease.release()
        if interrupts is not None:
            interrupts.release()
            ending = interrupts.ending_at_start(exc, exp.name)
            if ending is not None:
                raise ending from None
        raise
    if interrupts is not None:
        interrupts.retake()
    session.journal.write_only_while(lease.may_write)
    session.dispatcher.drive_only_while(lease.may_write)
    if exp.logger is not None:
        exp.logger.write_only_while(lease.may_write)
    lease.on_lost(session.dispatcher.abort)
    return Opened(exp, session, lease, interrupts)


def release_ray(owned: bool) -> None:
    """Shut Ray down if this session started it (never a cluster it joined or found)."""
    import ray

    if owned and ray.is_initialized():
        ray.shutdown()


def _import_the_engine() -> None:
    """Import what a session runs on, in a worker thread before the lease is taken: Ray
    and the engine take seconds to import on a loaded machine, and loading Ray's
    extension holds the GIL meanwhile, so the loop could not renew the lease then."""
    import orchestrator.api.resumption
    import orchestrator.engine.collector
    import orchestrator.engine.executor
    import orchestrator.engine.hooks
    import orchestrator.engine.loop
    import orchestrator.engine.ray_calls
    import orchestrator.journal.existing
    import orchestrator.journal.writer  # noqa: F401


async def open_session(exp: Experiment) -> Session:
    """Open everything ``exp`` needs to run trials; on failure, release what was opened."""
    import storage as storage_pkg
    from orchestrator.api.resumption import adopt_experiment
    from orchestrator.core.sweep_doc import compact
    from orchestrator.engine.collector import CheckpointCollector, delete_where_visible_fn
    from orchestrator.engine.executor import RaySettings
    from orchestrator.engine.hooks import HookRunner
    from orchestrator.engine.loop import Dispatcher
    from orchestrator.engine.ray_calls import RAY
    from orchestrator.engine.raystart import start_ray
    from orchestrator.journal.existing import check_existing
    from orchestrator.journal.writer import Journal

    settings, mode, opening = exp.settings, exp.storage_mode, exp.opening
    uri, options = opening.storage_uri, dict(opening.storage_options)
    journaled = await check_existing(uri, options, settings, mode)
    resumption = adopt_experiment(exp, journaled) if journaled is not None else None
    backend = RAY if opening.ray_backend is None else opening.ray_backend
    owns_ray = opening.ray_backend is None and await start_ray(  # off the loop: the lease
        opening.ray_address, num_cpus=opening.num_cpus, log_to_driver=opening.log_to_driver
    )
    try:
        store = storage_pkg.open_storage(uri, **options)
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
            # In the short form (``core/sweep_doc.py``): a sweep not run again in this
            # session is written back at every write, and must not cost O(its trials).
            exp.journaled_sweeps = {d["name"]: compact(d) for d in extras.get("sweeps", [])}
            started_at = extras.get("started_at")
        loop_handler = storage_pkg.quiet_sdk_noise(loop)
        if journaled is not None and journaled.logs and resumption is not None:
            await _keep_logs_aside(exp, store, journaled, resumption)
        journal = Journal(store, name=exp.name, interval=settings.buffering.journal_interval)
        if started_at is not None:
            journal.started_at = float(started_at)
        journal.set_extras(exp.journal_extras)
        builtins = _builtin_hooks(exp, store)
        # The built-in logs first: a user's on_experiment_end finds them complete (a
        # tracker storing the trials' directories, MLflow's save_artifact, relies on it).
        hooks = HookRunner([*builtins, *opening.hooks], slow_after=settings.hook_slow_after)
        collector = CheckpointCollector(
            store,
            is_pinned=lambda key: dispatcher.is_pinned(key),
            delete=delete_where_visible_fn(store, mode, backend),
        )
        ray = RaySettings(
            storage_uri=uri,
            storage_options=options,
            storage_mode=mode,
            runtime_env=opening.runtime_env,
            trials_per_worker=settings.trials_per_worker,
            spare_actors=settings.failures.spare_actors,
            save_retry_for=settings.storage.save_retry_for,
            stop_grace_s=settings.failures.stop_grace_s,
        )
        dispatcher = Dispatcher(
            ray,
            uri_for=lambda key: _checkpoint_uri(store, key, mode.is_local),
            local_path_for=lambda key: store.uri_for(key) if mode.is_local else None,
            hooks=hooks,
            collector=collector,
            journal=journal,
            backend=backend,
        )
    except BaseException:  # one way back for any failure between opening and running
        loop.set_exception_handler(loop_handler)
        exp.logger = exp.progress = None
        await store.aclose()
        release_ray(owns_ray)
        raise
    dispatcher.start()
    exp.hook_progress.bind(hooks)  # the trials' policies read their hooks' progress there
    exp.dispatcher, exp.hooks, exp.journal, exp.resumption = dispatcher, hooks, journal, resumption
    exp.preview = None  # the journal just read is the one that counts
    for rt in exp.trials.values():
        dispatcher.attach(rt)
        collector.hold(rt.machine.timeline)
    _delete_off_timeline(store, collector, exp.trials.values(), mode.is_local)
    journal.start()
    if journaled is not None:  # a resumed run: the blobs the last one's crash left unheld
        collector.start_sweep()
    return Session(
        exp, store, journal, hooks, dispatcher, collector, builtins, owns_ray, loop_handler
    )


def _delete_off_timeline(
    store: storage_pkg.Storage,
    collector: CheckpointCollector,
    trials: Iterable[TrialRuntime],
    local: bool,
) -> None:
    """A resumed experiment's checkpoints that no timeline lists go, as a rollback's do."""
    from orchestrator.core.checkpoints import Checkpoint
    from orchestrator.engine.adoption import off_timeline_keys

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


async def _keep_logs_aside(
    exp: Experiment, store: storage_pkg.Storage, journaled: JournalContents, resumption: Resumption
) -> None:
    """Before the loggers rewrite a resumed trial's logs from its history, the logs that
    hold more (an abandoned run's rows) are kept aside (:mod:`orchestrator.journal.trial_logs`)."""
    from orchestrator.journal.trial_logs import keep_aside
    from orchestrator.views.loggers.writers import line_logs

    names = line_logs(exp.opening.logger_names or ())
    if names:
        await keep_aside(
            store,
            exp.trials.values(),
            journaled.logs,
            names,
            restarting=resumption.spec_lost.keys(),
        )


def _checkpoint_uri(store: storage_pkg.Storage, key: str, local: bool) -> str:
    where = store.uri_for(key)
    return "file://" + where if local else where


def _builtin_hooks(exp: Experiment, store: storage_pkg.Storage) -> list[Any]:
    """The per-trial logs and the live progress display (both hooks, inline); they are
    ``exp.logger`` and ``exp.progress`` while the session is open."""
    hooks: list[Any] = []
    names = exp.opening.logger_names
    if names:
        from orchestrator.views.loggers import ExperimentLogger

        if exp.storage_mode.is_local:  # beside the checkpoints, in the experiment
            exp.logger = ExperimentLogger(store.uri, loggers=names)
        else:  # on the driver's disk, uploaded in the background
            logdir = tempfile.mkdtemp(prefix=f"trialflow-logs-{exp.name}-")
            exp.logger = ExperimentLogger(logdir, storage=store, loggers=names)
        hooks.append(exp.logger)
    if exp.opening.progress:
        from orchestrator.views.progress import ProgressReporter

        exp.progress = ProgressReporter()
        hooks.append(exp.progress)
    return hooks
