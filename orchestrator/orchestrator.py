"""``Orchestrator``: the async context manager that ties the pieces together.

It owns the Ray connection (joining a running cluster, or starting an embedded local one
that it shuts down on exit), the experiment's storage, the hook runner, the checkpoint
collector and the dispatcher loop. The loop runs for the whole ``async with`` block, so
requests such as ``await trial.restore()`` work before, during and after ``run()``.

The driver's machinery (storage, journal, hooks, loop, the trial state machine) is
imported by the methods that use it, not by this module: every trial worker imports
the user's module, which imports :class:`Orchestrator`, and loading all of that cost
each worker process about 0.12 CPU-seconds of start-up it never used.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

import ray

from .errors import ConfigError, OrchestratorError, TrialError
from .stopping import StopCondition, StopSpec
from .trainable import Trainable, is_trainable_class

if TYPE_CHECKING:
    import storage as storage_pkg

    from .checkpoints import Checkpoint, RetentionPolicy, ScoreMode
    from .collector import CheckpointCollector, CollectorStatistics
    from .hooks import HookRunner, HookStatistics
    from .journal import Journal, JournaledTrial
    from .loop import Dispatcher, LoopStatistics
    from .trial import Trial

log = logging.getLogger("orchestrator")

DEFAULT_RESULTS_DIR = os.path.join("~", "trialflow_results")


@dataclass(frozen=True)
class OrchestratorStatistics:
    trials: Mapping[str, int]
    loop: LoopStatistics
    hooks: HookStatistics
    gc: CollectorStatistics


class Orchestrator:
    """Runs trials on Ray. Use as ``async with Orchestrator(...) as orch:``.

    Parameters
    ----------
    storage:
        Where checkpoints go: ``None`` (``~/trialflow_results``, or
        ``$TRIALFLOW_RESULTS_DIR``), a path, ``file://...``, ``s3://bucket/prefix`` or
        ``gs://bucket/prefix``. The experiment lives under ``<storage>/<name>``.
    name:
        The experiment's name.
    max_failures:
        Failures a trial may recover from (by restoring its newest checkpoint) before it
        goes to ERROR; ``-1`` means no limit. ``add_trial`` may override it.
    keep_checkpoints, checkpoint_score:
        Retention: keep the N newest (or N best by ``(metric, "max" | "min")``), always
        with the newest; ``None`` keeps all. ``add_trial`` may override both.
    hooks:
        Objects with any of the hook methods (see ``orchestrator.hooks``).
    ray_address:
        ``None``: use Ray if already initialised, else start a local one (and shut it
        down on exit). ``"auto"`` or an address: join that running cluster.
    failure_backoff:
        Seconds before the first restart after a failure; doubles with each
        consecutive failure (up to 30 s), reset by the next result.
    fallback_to_scratch:
        When none of a trial's checkpoints can be loaded (corrupted, say), start it
        over from scratch instead of failing it.
    save_retry_for:
        Seconds a checkpoint upload is retried while storage is unreachable (training
        goes on meanwhile); past that the trial pauses with the storage error.
    max_pending_saves:
        Checkpoints a trial may have saved but not yet persisted while it trains on
        (default 2). When storage is slower than training, the trial's next step waits
        for an upload to finish instead of piling more checkpoints into the node's
        scratch space. ``0``: every checkpoint is persisted before training goes on.
    storage_options:
        Driver options for ``open_storage`` (e.g. ``endpoint_url``), used by the
        driver and by every trial's actor.
    runtime_env:
        A Ray runtime environment for the trials' actors, e.g.
        ``{"env_vars": {"AWS_PROFILE": "x"}}`` when workers need credentials or
        settings the cluster's processes do not have.
    storage_shared:
        For a local path: ``True`` when every node sees the same files there (NFS).
        Otherwise (the default) a checkpoint stays on the disk of the node that saved
        it; a trial restarting on another node has it streamed over (``transfer``),
        and garbage collection deletes it on its node.
    resume, resume_errored:
        Continue the experiment ``name`` in ``storage`` from its journal (after the
        driver died or exited): TERMINATED trials keep their results and are not re-run,
        PAUSED ones stay paused, the others restart from their newest committed
        checkpoint; ERROR ones are retried only with ``resume_errored=True``. Without
        ``resume``, an experiment of that name already in storage is an error
        (:class:`~orchestrator.errors.ExperimentExists`); with it, a missing one is
        (:class:`~orchestrator.errors.ExperimentNotFound`, and nothing is created).
    overwrite:
        Delete an existing experiment of that name, completely, before starting.
    strict_metrics:
        A metric of the stop criterion that a trial's first result does not report is an
        error (the trial goes to ERROR naming it and the keys reported), as in Ray Tune;
        ``False`` for metrics that first appear in later results.
    result_buffer:
        Steps an actor may run per call (default 1). Above 1 the actor runs ahead while
        no decision is pending, never past a checkpoint or the stop condition, so stop,
        pause and restore stay exact; it cuts per-step overhead for very short steps.
    trials_per_worker:
        How many trials asking for the same resources may share one actor (one worker
        process; default 1: each trial has its own). Starting a worker costs about a
        CPU-second, most of a short or light trial's cost; sharing trades it for less
        isolation: a trial's exception still fails only that trial, but a crashed or
        killed process fails (and restarts) all the trials it hosted, and their steps
        take turns in that process. The actor reserves the sum of its trials'
        resources.
    """

    def __init__(
        self,
        storage: str | os.PathLike[str] | None = None,
        name: str = "exp",
        max_failures: int = 0,
        keep_checkpoints: int | None = None,
        hooks: Iterable[Any] = (),
        *,
        checkpoint_score: tuple[str, ScoreMode] | None = None,
        ray_address: str | None = None,
        result_buffer: int = 1,
        trials_per_worker: int = 1,
        failure_backoff: float = 0.2,
        fallback_to_scratch: bool = False,
        save_retry_for: float = 300.0,
        max_pending_saves: int = 2,
        hook_slow_after: float = 10.0,
        storage_options: Mapping[str, Any] | None = None,
        runtime_env: Mapping[str, Any] | None = None,
        storage_shared: bool = False,
        resume: bool = False,
        resume_errored: bool = False,
        overwrite: bool = False,
        strict_metrics: bool = True,
        journal_interval: float = 1.0,
        num_cpus: float | None = None,
        log_to_driver: bool = True,
    ) -> None:
        import storage as storage_pkg

        from .checkpoints import RetentionPolicy

        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            raise ConfigError(f"experiment name must be a non-empty str without '/', got {name!r}")
        _check_failures(max_failures, "Orchestrator")
        _check_int_at_least(result_buffer, "result_buffer", "Orchestrator")
        _check_int_at_least(trials_per_worker, "trials_per_worker", "Orchestrator")
        _check_int_at_least(max_pending_saves, "max_pending_saves", "Orchestrator", least=0)
        self.name = name
        self.trials_per_worker = trials_per_worker
        self.max_failures = max_failures
        self.retention = RetentionPolicy(keep_checkpoints, checkpoint_score)
        self.result_buffer = result_buffer
        self.failure_backoff = float(failure_backoff)
        self.fallback_to_scratch = bool(fallback_to_scratch)
        self.save_retry_for = float(save_retry_for)
        self.max_pending_saves = max_pending_saves
        if resume and overwrite:
            raise ConfigError(
                f"experiment {name!r}: resume=True continues the experiment and "
                "overwrite=True deletes it; pass one of them"
            )
        self.resume = bool(resume)
        self.resume_errored = bool(resume_errored)
        self.overwrite = bool(overwrite)
        self.strict_metrics = bool(strict_metrics)
        self._journal_interval = float(journal_interval)
        self._journal: Journal | None = None
        from .hooks import check_hooks

        self._hooks_list = list(hooks)
        check_hooks(self._hooks_list)
        self._hook_slow_after = hook_slow_after
        self._ray_address = ray_address
        self._num_cpus = num_cpus
        self._log_to_driver = log_to_driver
        self.storage_uri = _experiment_uri(storage, name)
        self._storage_options = dict(storage_options or {})
        self._runtime_env = dict(runtime_env) if runtime_env else None
        self.storage_shared = bool(storage_shared)
        try:
            probe = storage_pkg.open_storage(self.storage_uri, **self._storage_options)
        except storage_pkg.StorageError as err:
            raise ConfigError(f"experiment {name!r}: {err}") from err
        self._is_local = isinstance(probe, storage_pkg.LocalStorage)
        if self._is_local:
            self._storage_options.setdefault("create", True)
        self._storage: storage_pkg.Storage | None = None
        self._trials: dict[str, Trial] = {}
        self._token = secrets.token_hex(3)
        self._owns_ray = False
        self._dispatcher: Dispatcher | None = None
        self._hooks: HookRunner | None = None
        self._collector: CheckpointCollector | None = None
        self._runs_in_progress = 0
        self._loop_handler: Any = None  # the loop's exception handler before ours

    # -- trials ------------------------------------------------------------------------

    @property
    def trials(self) -> list[Trial]:
        return list(self._trials.values())

    def add_trial(
        self,
        trainable: type[Trainable],
        config: Mapping[str, Any] | None = None,
        stop: StopSpec = None,
        checkpoint_every: int = 0,
        resources: Mapping[str, float] | None = None,
        *,
        trial_id: str | None = None,
        max_failures: int | None = None,
        keep_checkpoints: int | None = None,
        checkpoint_score: tuple[str, ScoreMode] | None = None,
        result_buffer: int | None = None,
    ) -> Trial:
        """Add a trial; it starts at ``run()``, or at once if ``run()`` is in progress."""
        from .checkpoints import RetentionPolicy

        index = len(self._trials)
        if not is_trainable_class(trainable):
            got = trainable.__name__ if isinstance(trainable, type) else repr(trainable)
            raise ConfigError(
                f"add_trial (trial #{index}): {got} is not a subclass of orchestrator.Trainable;"
                " define `class MyTrainable(Trainable)` with setup/step/save_checkpoint/"
                "load_checkpoint"
            )
        if trial_id is None:
            trial_id = f"{trainable.__name__}_{self._token}_{index:05d}"
        if not isinstance(trial_id, str) or not trial_id or "/" in trial_id:
            raise ConfigError(f"trial_id must be a non-empty str without '/', got {trial_id!r}")
        from .journal import RESERVED_NAMES

        if trial_id in RESERVED_NAMES:
            raise ConfigError(
                f"trial_id {trial_id!r} is the name of the experiment's journal in storage; "
                "choose another"
            )
        if trial_id in self._trials:
            raise ConfigError(f"trial {trial_id} already exists in experiment {self.name!r}")
        if config is not None and not isinstance(config, Mapping):
            raise ConfigError(
                f"trial {trial_id}: config must be a dict, got {type(config).__name__}"
            )
        if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int):
            raise ConfigError(
                f"trial {trial_id}: checkpoint_every must be an int >= 0, got {checkpoint_every!r}"
            )
        if checkpoint_every < 0:
            raise ConfigError(
                f"trial {trial_id}: checkpoint_every must be >= 0 (0 disables checkpoints), "
                f"got {checkpoint_every}"
            )
        _check_sendable(config or {}, trial_id)
        failures = self.max_failures if max_failures is None else max_failures
        _check_failures(failures, f"trial {trial_id}")
        buffer = self.result_buffer if result_buffer is None else result_buffer
        _check_int_at_least(buffer, "result_buffer", f"trial {trial_id}")
        retention = self.retention
        if keep_checkpoints is not None or checkpoint_score is not None:
            retention = RetentionPolicy(
                keep_checkpoints if keep_checkpoints is not None else self.retention.keep,
                checkpoint_score if checkpoint_score is not None else self.retention.score,
            )
        trial = self._build_trial(
            trial_id,
            trainable,
            dict(config or {}),
            StopCondition(trial_id, stop),
            _check_resources(resources, trial_id),
            checkpoint_every=checkpoint_every,
            max_failures=failures,
            retention=retention,
            result_buffer=buffer,
        )
        self._trials[trial_id] = trial
        if self._dispatcher is not None:
            self._dispatcher.attach(trial)
            if self._runs_in_progress:
                self._dispatcher.launch(trial)
        return trial

    # -- running -----------------------------------------------------------------------

    async def run(self) -> list[Trial]:
        """Start every PENDING trial; return once all trials are settled
        (TERMINATED, ERROR, or PAUSED with nobody resuming them) and hooks are done."""
        from .lifecycle import TrialState

        dispatcher, hooks = self._require_entered()
        # While a run() is in progress, add_trial starts trials at once; trials added
        # after it returned wait for the next run(), which can wait for them.
        self._runs_in_progress += 1
        try:
            for trial in self._trials.values():
                if trial.state is TrialState.PENDING:
                    dispatcher.launch(trial)
            while True:
                await dispatcher.wait_settled()
                await hooks.wait_idle()
                await asyncio.sleep(0)
                if dispatcher.settled_now() and hooks.statistics().backlog == 0:
                    break
        finally:
            self._runs_in_progress -= 1
        trials = self.trials
        await hooks.call_now("on_experiment_end", trials)
        return trials

    def run_sync(self) -> list[Trial]:
        """One call for plain scripts: enter, ``run()``, exit. Not inside a running loop."""

        async def main() -> list[Trial]:
            async with self:
                return await self.run()

        return asyncio.run(main())

    def statistics(self) -> OrchestratorStatistics:
        dispatcher, hooks = self._require_entered()
        assert self._collector is not None
        counts: dict[str, int] = {}
        for trial in self._trials.values():
            counts[trial.state.value] = counts.get(trial.state.value, 0) + 1
        return OrchestratorStatistics(
            counts, dispatcher.statistics(), hooks.statistics(), self._collector.statistics()
        )

    # -- context manager ---------------------------------------------------------------

    async def __aenter__(self) -> Orchestrator:
        import storage as storage_pkg

        from .collector import CheckpointCollector
        from .hooks import HookRunner
        from .journal import Journal
        from .journal import load as load_journal
        from .locality import is_visible
        from .loop import Dispatcher
        from .node_local import delete_where_visible

        if self._dispatcher is not None:
            raise OrchestratorError(f"experiment {self.name!r}: this Orchestrator is already open")
        await self._check_existing()
        self._owns_ray = _ensure_ray(self._ray_address, self._num_cpus, self._log_to_driver)
        try:
            store = storage_pkg.open_storage(self.storage_uri, **self._storage_options)
            await store.open()
        except Exception:
            self._release_ray()
            raise
        self._storage = store
        self._loop_handler = storage_pkg.quiet_sdk_noise(asyncio.get_running_loop())
        if self.resume:
            try:
                journaled = await load_journal(store)
            except Exception:
                await store.aclose()
                self._release_ray()
                raise
            for entry in journaled or []:
                if entry.id not in self._trials:
                    self._adopt(entry)
        self._journal = Journal(store, name=self.name, interval=self._journal_interval)
        self._hooks = HookRunner(self._hooks_list, slow_after=self._hook_slow_after)
        node_local = self._is_local and not self.storage_shared
        root = store.uri

        async def delete(ckpt: Checkpoint) -> None:
            # Local storage the nodes may not share: delete it where it is visible (here,
            # or on a live node that sees it); one that no live node sees is dropped.
            if not node_local or ckpt.path is None:
                await store.delete_checkpoint(ckpt.key)
                return
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

        dispatcher = Dispatcher(
            storage_uri=self.storage_uri,
            storage_options=self._storage_options,
            uri_for=self._checkpoint_uri,
            local_path_for=self._checkpoint_path,
            hooks=self._hooks,
            collector=CheckpointCollector(
                store, is_pinned=lambda key: dispatcher.is_pinned(key), delete=delete
            ),
            save_retry_for=self.save_retry_for,
            journal=self._journal,
            runtime_env=self._runtime_env,
            node_local=node_local,
            local_storage=self._is_local,
            trials_per_worker=self.trials_per_worker,
        )
        self._collector = dispatcher._collector
        self._dispatcher = dispatcher
        dispatcher.start()
        for trial in self._trials.values():
            dispatcher.attach(trial)
        self._journal.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        dispatcher, hooks, collector = self._dispatcher, self._hooks, self._collector
        self._dispatcher = self._hooks = self._collector = None
        try:
            if dispatcher is not None:
                await dispatcher.aclose()
            if self._journal is not None:
                await self._journal.aclose()
                self._journal = None
            if collector is not None:
                try:
                    await asyncio.wait_for(collector.drain(), timeout=30)
                except asyncio.TimeoutError:
                    log.warning("checkpoint deletions still pending at exit were abandoned")
                await collector.aclose()
            if hooks is not None:
                await hooks.aclose()
            if self._storage is not None:
                await self._storage.aclose()
                self._storage = None
                asyncio.get_running_loop().set_exception_handler(self._loop_handler)
        finally:
            self._release_ray()

    # -- internals ---------------------------------------------------------------------

    def _adopt(self, entry: JournaledTrial) -> Trial:
        """Rebuild a journaled trial as it should continue after a driver restart.

        A trial that will not run (TERMINATED, PAUSED, or ERROR when not retried) is
        rebuilt without its code, so its module need not be importable here; its code is
        loaded if it is ever started again."""
        from .checkpoints import RetentionPolicy
        from .lifecycle import TrialState

        state = TrialState(entry.state)
        finished = state in (TrialState.TERMINATED, TrialState.PAUSED) or (
            state is TrialState.ERROR and not self.resume_errored
        )
        if finished:
            trainable: Any = _not_loaded(entry)
            config = entry.plain_config
            try:
                stop = entry.load_stop()
            except ConfigError:
                stop = StopCondition(entry.id, None)
        else:
            trainable, config, stop = entry.load_trainable(), entry.load_config(), entry.load_stop()
        trial = self._build_trial(
            entry.id,
            trainable,
            config,
            stop,
            entry.resources,
            checkpoint_every=entry.checkpoint_every,
            max_failures=entry.max_failures,
            retention=RetentionPolicy(entry.keep_checkpoints, entry.checkpoint_score),  # type: ignore[arg-type]
            result_buffer=entry.result_buffer,
        )
        trial._spec = dict(entry.spec)  # as journaled: it never changes
        if finished:
            trial._trainable_loader = lambda: (
                entry.load_trainable(),
                entry.load_config(),
                entry.load_stop(),
            )
        machine = trial._machine
        machine.checkpoints = list(entry.checkpoints)
        machine.num_failures = entry.num_failures
        results = entry.results
        if state is TrialState.ERROR and self.resume_errored:
            state = TrialState.PENDING
        if state is TrialState.TERMINATED or state is TrialState.ERROR:
            machine.iteration = results[-1]["training_iteration"] if results else 0
            if state is TrialState.ERROR:
                machine.error = TrialError(entry.id, f"(before the driver restarted) {entry.error}")
        else:
            # Continue from the newest checkpoint that survived; later results are gone.
            latest = machine.latest_checkpoint
            machine.iteration = latest.iteration if latest is not None else 0
            results = [r for r in results if r["training_iteration"] <= machine.iteration]
            if state is not TrialState.PAUSED:
                state = TrialState.PENDING
        machine.state = state
        trial.results = list(results)
        trial.last_result = results[-1] if results else None
        self._trials[entry.id] = trial
        log.info("resumed trial %s (%s, iteration %d)", entry.id, state.value, machine.iteration)
        return trial

    def _build_trial(
        self,
        trial_id: str,
        trainable: type[Trainable],
        config: dict[str, Any],
        stop: StopCondition,
        resources: dict[str, float],
        *,
        checkpoint_every: int,
        max_failures: int,
        retention: RetentionPolicy,
        result_buffer: int,
    ) -> Trial:
        """A new trial, PENDING, with its state machine and journal spec: for
        ``add_trial`` and for a trial rebuilt from the journal alike."""
        from .journal import spec_of
        from .lifecycle import TrialMachine, TrialPolicy
        from .trial import Trial

        policy = TrialPolicy(
            checkpoint_every=checkpoint_every,
            max_failures=max_failures,
            retention=retention,
            should_stop=stop,
            backoff_base=self.failure_backoff,
            fallback_to_scratch=self.fallback_to_scratch,
            steps_per_call=result_buffer,
            iteration_limit=stop.iteration_limit,
            max_pending_saves=self.max_pending_saves,
            required_metrics=stop.metrics if self.strict_metrics else (),
        )
        trial = Trial(
            trial_id,
            trainable,
            config,
            machine=TrialMachine(trial_id, policy),
            stop=stop,
            resources=resources,
        )
        trial._spec = spec_of(
            trial,
            checkpoint_every=checkpoint_every,
            max_failures=max_failures,
            keep_checkpoints=retention.keep,
            checkpoint_score=retention.score,
            result_buffer=result_buffer,
        )
        return trial

    async def _check_existing(self) -> None:
        """Refuse to open an existing experiment without ``resume`` (or to resume a
        missing one), before Ray starts; with ``overwrite``, delete the old one."""
        import storage as storage_pkg

        from .existing import delete_all, find, refuse_or_accept

        options = dict(self._storage_options)
        if self._is_local:
            options["create"] = False  # looking must create nothing
        store = storage_pkg.open_storage(self.storage_uri, **options)
        try:
            try:
                await store.open()
            except storage_pkg.BucketNotFound:
                if not self._is_local:
                    raise
                found = None  # no directory: no experiment
            else:
                found = await find(store)
            if refuse_or_accept(
                found,
                uri=self.storage_uri,
                name=self.name,
                resume=self.resume,
                overwrite=self.overwrite,
            ):
                await delete_all(store, store.uri if self._is_local else None)
        finally:
            await store.aclose()

    def _require_entered(self) -> tuple[Dispatcher, HookRunner]:
        if self._dispatcher is None or self._hooks is None:
            raise OrchestratorError(
                f"experiment {self.name!r}: use `async with Orchestrator(...) as orch:` "
                "(or orch.run_sync()) before running"
            )
        return self._dispatcher, self._hooks

    def _checkpoint_uri(self, key: str) -> str:
        assert self._storage is not None
        where = self._storage.uri_for(key)
        return "file://" + where if self._is_local else where

    def _checkpoint_path(self, key: str) -> str | None:
        assert self._storage is not None
        return self._storage.uri_for(key) if self._is_local else None

    def _release_ray(self) -> None:
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
        self._owns_ray = False


def _not_loaded(entry: JournaledTrial) -> type[Trainable]:
    """Stands for a finished trial's trainable, which was not imported; the loop loads
    the real one if the trial is ever started again (see ``Trial._trainable_loader``)."""
    path = entry.spec.get("trainable") or ""
    name = path.rpartition(":")[2].rpartition(".")[2] or "Trainable"
    return type(name, (Trainable,), {"__doc__": f"{entry.trainable_name}, not loaded"})


def _experiment_uri(storage: str | os.PathLike[str] | None, name: str) -> str:
    if storage is None:
        base = os.environ.get("TRIALFLOW_RESULTS_DIR") or DEFAULT_RESULTS_DIR
        return os.path.join(os.path.abspath(os.path.expanduser(base)), name)
    text = os.fspath(storage)
    if not isinstance(text, str):
        raise ConfigError(f"storage must be a path or URI string, got {storage!r}")
    if "://" in text:
        return text.rstrip("/") + "/" + name
    return os.path.join(os.path.abspath(os.path.expanduser(text)), name)


def _ensure_ray(address: str | None, num_cpus: float | None, log_to_driver: bool) -> bool:
    """Connect to Ray; returns whether this orchestrator started (and must stop) it."""
    if ray.is_initialized():
        return False
    if address is not None:
        ray.init(address=address, log_to_driver=log_to_driver, logging_level=logging.WARNING)
        return True
    if os.environ.get("RAY_ADDRESS"):
        ray.init(log_to_driver=log_to_driver, logging_level=logging.WARNING)
        return True
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a private, local cluster
    # address="local": a new private cluster. A bare ray.init() would join whichever
    # local cluster was started last on this machine, maybe somebody else's.
    options: dict[str, Any] = {
        "address": "local",
        "num_cpus": int(num_cpus) if num_cpus is not None else None,
        "include_dashboard": False,
        "log_to_driver": log_to_driver,
        "logging_level": logging.WARNING,
    }
    try:
        ray.init(**options)
    except Exception as err:  # Ray gives up after a fixed time on a loaded machine
        log.warning("starting a local Ray failed (%s); trying once more", err)
        ray.shutdown()
        ray.init(**options)
    return True


def _check_sendable(config: Mapping[str, Any], trial_id: str) -> None:
    """The config goes to a worker process (pickled): name the key that cannot."""
    import cloudpickle

    try:
        cloudpickle.dumps(config)
        return
    except Exception as err:
        path, cause = _unpicklable(config, ()) or ((), err)
    where = ".".join(path) or "(the whole config)"
    raise ConfigError(
        f"trial {trial_id}: config key {where!r} cannot be sent to a worker process "
        f"({type(cause).__name__}: {cause}); put only picklable values in the config and "
        "create locks, clients or open files in the trainable's setup()"
    ) from cause


def _unpicklable(value: Any, path: tuple[str, ...]) -> tuple[tuple[str, ...], Exception] | None:
    import cloudpickle

    if isinstance(value, Mapping):
        for key, item in value.items():
            found = _unpicklable(item, (*path, str(key)))
            if found is not None:
                return found
        return None
    try:
        cloudpickle.dumps(value)
    except Exception as err:
        return path, err
    return None


def _check_failures(value: Any, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise ConfigError(
            f"{where}: max_failures must be an int >= -1 (-1: no limit), got {value!r}"
        )


def _check_int_at_least(value: Any, what: str, where: str, least: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{where}: {what} must be an int >= {least}, got {value!r}")


def _check_resources(resources: Mapping[str, float] | None, trial_id: str) -> dict[str, float]:
    if resources is None:
        return {"cpu": 1.0}
    if not isinstance(resources, Mapping):
        raise ConfigError(
            f"trial {trial_id}: resources must be a dict like {{'cpu': 0.5}}, got {resources!r}"
        )
    checked: dict[str, float] = {}
    for key, amount in resources.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"trial {trial_id}: resource names must be str, got {key!r}")
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            raise ConfigError(
                f"trial {trial_id}: resource {key!r} must be a number >= 0, got {amount!r}"
            )
        checked[key] = float(amount)
    return checked
