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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.actor.trainable import Trainable
from orchestrator.core.checkpoints import RetentionPolicy
from orchestrator.core.options import ResourcesSpec, TrialOptions, call_options
from orchestrator.core.settings import (
    Buffering,
    Continuation,
    ExperimentSettings,
    FaultTolerance,
    StorageUse,
)
from orchestrator.core.stopping import StopSpec
from orchestrator.errors import ConfigError, OrchestratorError

if TYPE_CHECKING:
    from orchestrator.api.session import Opened
    from orchestrator.api.sweep_result import SweepResult
    from orchestrator.api.trial import Trial
    from orchestrator.core.checkpoints import ScoreMode
    from orchestrator.core.settings import StorageMode
    from orchestrator.core.spec import TrialSpec
    from orchestrator.engine.collector import CollectorStatistics
    from orchestrator.engine.hooks import HookStatistics
    from orchestrator.engine.loop import Dispatcher, LoopStatistics
    from orchestrator.schedulers import Scheduler
    from orchestrator.search import Searcher

log = logging.getLogger("orchestrator")


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
        Objects with any of the hook methods (see ``orchestrator.engine.hooks``).
    ray_address:
        ``None``: use Ray if already initialised, else start a local one (and shut it
        down on exit). ``"auto"`` or an address: join that running cluster.
    failure_backoff:
        The first restart after a failure is at once; each consecutive failure after it
        waits this many seconds first, doubling (up to 30 s); the next result resets it.
    fallback_to_scratch:
        When none of a trial's checkpoints can be loaded (corrupted, say), start it
        over from scratch instead of failing it.
    save_retry_for:
        Seconds a checkpoint upload is retried while storage is unreachable (training
        goes on meanwhile); past that the trial pauses with the storage error. A full
        disk or a file storage cannot keep is not retried: the trial pauses at once.
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
        For a local path: ``True`` when every node sees the same files there (NFS), so
        restores need not look for a checkpoint's files. Otherwise (the default) a
        restore looks where they are (:mod:`orchestrator.actor.locality`) and streams them
        from a node that sees them when its own does not.
    resume, resume_errored:
        Continue the experiment ``name`` in ``storage`` from its journal (after the
        driver died or exited): TERMINATED trials keep their results and are not re-run,
        PAUSED ones stay paused (but one paused because a checkpoint could not be
        stored resumes, with a log line), the others restart from their newest committed
        checkpoint; ERROR ones are retried only with ``resume_errored=True`` (from
        their newest checkpoint) or ``resume_errored="restart"`` (from scratch). Without
        ``resume``, an experiment of that name already in storage is an error
        (:class:`~orchestrator.errors.ExperimentExists`); with it, a missing one is
        (:class:`~orchestrator.errors.ExperimentNotFound`, and nothing is created).
    overwrite:
        Delete an existing experiment of that name, completely, before starting.
    take_over:
        One experiment has one driver: entering takes the experiment's lease (in its
        storage, before Ray starts) and a second driver is refused
        (:class:`~orchestrator.errors.ExperimentLocked`, naming the first: host, pid,
        since when). A lease its driver stopped renewing (a crash, a hang) expires after
        30 s (``$TRIALFLOW_LEASE_TTL_S``), at once if that driver was a process of this
        machine that is gone. ``True`` takes the lease even from a driver that seems
        alive (its machine died, say); a driver that does run on then stops at its next
        renewal with :class:`~orchestrator.errors.LeaseLost`, writing nothing more.
    loggers:
        Per-trial logs in ``<experiment>/<trial_id>/`` (``result.json``, ``progress.csv``,
        ``params.json`` and TensorBoard event files): ``None`` (default) writes all
        three kinds; a list picks some (``["json", "csv", "tensorboard"]``) and may
        hold users' own logger objects (any hook); ``[]`` writes none. With S3 or GCS
        storage the files are written on the driver's disk and uploaded in the
        background.
    progress:
        A live table of the trials in a terminal (a line every few seconds elsewhere);
        ``False`` silences it. The reporter is ``orch.progress`` once entered.
    strict_metrics:
        A metric of the stop criterion that a trial's first result does not report is an
        error (the trial goes to ERROR naming it and the keys reported), as in Ray Tune;
        ``False`` for metrics that first appear in later results.
    result_buffer:
        Steps an actor may run per call. ``None`` (the default) is *adaptive*: a call
        runs steps back to back for about 20 ms (``spec.ADAPTIVE_SLICE_S``), so a long
        step returns alone and trivial ones come back in batches; ``1`` is one step per
        call; ``N`` a hard cap. A call never runs past a checkpoint, the stop
        criterion or a scheduler's decision point, so stop, pause, restore and
        scheduling stay exact; a request lands once the call in flight returns.
    spare_actors:
        Started, idle actors kept per resource shape while trials of that shape may fail
        (``max_failures != 0``; default 1, ``0``: none): a failed trial restarts in one
        at once instead of waiting for a new worker process (about a second), and a
        replacement starts in the background. A spare is started only where the
        cluster's resources are free, never ahead of a trial waiting for them.
    stop_grace_s:
        Seconds ``trial.stop()`` and ``trial.pause()`` wait for a call in flight (a
        step, a restore) before they kill the trial's actor and settle the trial
        anyway (at least twice the trial's longest step so far, so a healthy slow step
        is never cut short; saves still in flight then get ``save_retry_for`` more).
        A stopped actor also gets this long for its cleanup, at exit too.
    trials_per_worker:
        How many trials asking for the same resources may share one actor (one worker
        process; default 1: each trial has its own). Starting a worker costs about a
        CPU-second, most of a short or light trial's cost; sharing trades it for less
        isolation: a trial's exception still fails only that trial, but a crashed or
        killed process fails (and restarts) all the trials it hosted, and their steps
        take turns in that process. The actor reserves the sum of its trials'
        resources.
    _ray_backend:
        Not for users: the Ray the engine calls. The engine's tests pass an in-process
        fake (``tests/support/fakeray.py``); ``None`` is Ray itself.
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
        result_buffer: int | None = None,
        trials_per_worker: int = 1,
        spare_actors: int = 1,
        failure_backoff: float = 0.2,
        fallback_to_scratch: bool = False,
        save_retry_for: float = 300.0,
        max_pending_saves: int = 2,
        hook_slow_after: float = 10.0,
        stop_grace_s: float = 30.0,
        storage_options: Mapping[str, Any] | None = None,
        runtime_env: Mapping[str, Any] | None = None,
        storage_shared: bool = False,
        resume: bool = False,
        resume_errored: bool | Literal["restart"] = False,
        overwrite: bool = False,
        take_over: bool = False,
        strict_metrics: bool = True,
        journal_interval: float = 1.0,
        num_cpus: float | None = None,
        log_to_driver: bool = True,
        loggers: Iterable[Any] | None = None,
        progress: bool = True,
        _ray_backend: Any = None,
    ) -> None:
        import storage as storage_pkg
        from orchestrator.api.experiment import Experiment, Opening
        from orchestrator.core.locations import experiment_uri
        from orchestrator.engine.hooks import check_hooks
        from orchestrator.journal.storage_check import open_checked
        from orchestrator.views.loggers.writers import split_loggers

        self.settings = ExperimentSettings(
            name=name,
            retention=RetentionPolicy(keep_checkpoints, checkpoint_score),
            failures=FaultTolerance(
                max_failures=max_failures,
                failure_backoff=failure_backoff,
                fallback_to_scratch=bool(fallback_to_scratch),
                spare_actors=spare_actors,
                stop_grace_s=stop_grace_s,
            ),
            buffering=Buffering(
                result_buffer=result_buffer,
                max_pending_saves=max_pending_saves,
                journal_interval=journal_interval,
            ),
            storage=StorageUse(shared=bool(storage_shared), save_retry_for=save_retry_for),
            continuation=Continuation(
                resume=bool(resume),
                resume_errored="restart" if resume_errored == "restart" else bool(resume_errored),
                overwrite=bool(overwrite),
            ),
            trials_per_worker=trials_per_worker,
            strict_metrics=bool(strict_metrics),
            hook_slow_after=hook_slow_after,
        )
        hooks_list = list(hooks)
        check_hooks(hooks_list)
        logger_names, user_loggers = split_loggers(loggers)
        check_hooks(user_loggers)
        self.storage_uri = experiment_uri(storage, name)
        storage_options = dict(storage_options or {})
        probe = open_checked(self.storage_uri, storage_options, name)
        self.storage_mode: StorageMode = self.settings.storage_mode(
            isinstance(probe, storage_pkg.LocalStorage)
        )
        if self.storage_mode.is_local:
            storage_options.setdefault("create", True)
        opening = Opening(
            storage_uri=self.storage_uri,
            storage_options=storage_options,
            ray_address=ray_address,
            num_cpus=num_cpus,
            log_to_driver=log_to_driver,
            runtime_env=dict(runtime_env) if runtime_env else None,
            hooks=hooks_list + list(user_loggers),
            logger_names=tuple(logger_names),
            progress=bool(progress),
            take_over=bool(take_over),
            ray_backend=_ray_backend,
        )
        self._exp: Experiment = Experiment(self.settings, self.storage_mode, opening)
        self._opened: Opened | None = None  # while entered

    # -- settings, as attributes --------------------------------------------------------

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def max_failures(self) -> int:
        return self.settings.failures.max_failures

    @property
    def retention(self) -> RetentionPolicy:
        return self.settings.retention

    @property
    def result_buffer(self) -> int | None:
        return self.settings.buffering.result_buffer

    @property
    def trials_per_worker(self) -> int:
        return self.settings.trials_per_worker

    @property
    def resume(self) -> bool:
        return self.settings.continuation.resume

    @property
    def storage_shared(self) -> bool:
        return self.settings.storage.shared

    # -- trials ------------------------------------------------------------------------

    @property
    def trials(self) -> list[Trial]:
        return self._exp.handles()

    @property
    def progress(self) -> Any:
        """The live progress display (a ``ProgressReporter``) while entered, else None."""
        return self._exp.progress

    def add_trial(
        self,
        trainable: type[Trainable] | Callable[..., Any],
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
        options: TrialOptions | None = None,
    ) -> Trial:
        """Add a trial; it starts at ``run()``, or at once if ``run()`` is in progress.

        ``stop``, ``checkpoint_every``, ``resources``, ``max_failures``,
        ``keep_checkpoints``, ``checkpoint_score`` and ``result_buffer`` are the trial's
        options (``None``: the experiment's); ``options=TrialOptions(...)`` gives them as
        one value instead (to share between calls and sweeps), never both.

        With ``resume=True`` a call that matches a journaled trial adopts it instead
        (the returned handle is the resumed trial): see :mod:`orchestrator.core.identity`
        for the rule (an explicit ``trial_id``, else the trainable, the config and the
        order of the calls). Before entering, the first call reads the journal (so a
        missing experiment or a damaged journal is said then), and the handle has the
        adopted trial's id at once: it never changes."""
        given = call_options(
            "add_trial" if trial_id is None else f"trial {trial_id}",
            options,
            stop=stop,
            checkpoint_every=checkpoint_every,
            resources=resources,
            max_failures=max_failures,
            keep_checkpoints=keep_checkpoints,
            checkpoint_score=checkpoint_score,
            result_buffer=result_buffer,
        )
        return self._exp.add_call(self._exp.trial_spec(trainable, config, given, trial_id))

    def trial_spec(
        self,
        trainable: type[Trainable] | Callable[..., Any],
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
        options: TrialOptions | None = None,
    ) -> TrialSpec:
        """The validated spec ``add_trial`` would build (the trial is not added): its
        options override the experiment's defaults."""
        given = call_options(
            "add_trial" if trial_id is None else f"trial {trial_id}",
            options,
            stop=stop,
            checkpoint_every=checkpoint_every,
            resources=resources,
            max_failures=max_failures,
            keep_checkpoints=keep_checkpoints,
            checkpoint_score=checkpoint_score,
            result_buffer=result_buffer,
        )
        return self._exp.trial_spec(trainable, config, given, trial_id)

    # -- running -----------------------------------------------------------------------

    async def run(self) -> list[Trial]:
        """Start every PENDING trial; return once all trials are settled
        (TERMINATED, ERROR, or PAUSED with nobody resuming them) and hooks are done."""
        from orchestrator.core.machine import TrialState

        exp = self._exp
        dispatcher, _ = exp.entered()
        # While a run() is in progress, add_trial starts trials at once; trials added
        # after it returned wait for the next run(), which can wait for them.
        exp.runs_in_progress += 1
        try:
            for rt in exp.trials.values():
                if rt.state is TrialState.PENDING:
                    dispatcher.launch(rt)
            await exp.wait_settled()
        finally:
            exp.runs_in_progress -= 1
        trials = self.trials
        await exp.end_hooks(trials)
        await _give_back_freed_memory()
        return trials

    async def sweep(
        self,
        trainable: Any,
        space: Mapping[str, Any],
        num_samples: int = 1,
        metric: str | None = None,
        mode: str | None = None,
        *,
        searcher: Searcher | None = None,
        scheduler: Scheduler | None = None,
        max_concurrent_trials: int | None = None,
        stop: StopSpec = None,
        checkpoint_every: int = 0,
        resources: ResourcesSpec = None,
        max_failures: int | None = None,
        keep_checkpoints: int | None = None,
        checkpoint_score: tuple[str, ScoreMode] | None = None,
        result_buffer: int | None = None,
        seed: int | None = None,
        name: str = "sweep",
        reuse_actors: bool = True,
        fail_fast: bool = False,
        options: TrialOptions | None = None,
    ) -> SweepResult:
        """Run a sweep: ``num_samples`` x the grid's points trials of ``trainable``, their
        configs drawn from ``space`` by ``searcher`` (default ``RandomSearch``), judged by
        ``scheduler`` (default: none, every trial runs to its stop criterion), at most
        ``max_concurrent_trials`` at once (default: what the cluster's resources hold).
        Returns once every trial of the sweep is settled; see :class:`SweepResult`.

        The other arguments are ``add_trial``'s, for every trial (``resources`` may also be
        a function of a trial's config returning its resources), as keywords or as
        ``options=TrialOptions(...)``. ``name`` names the
        sweep inside the experiment: after ``Orchestrator(resume=True)`` the same call
        continues it (finished trials are kept, the others restart from their
        checkpoints, only the remaining samples are asked for). ``reuse_actors``: a
        finished trial's worker process starts the next trial (a fresh trainable in it)
        instead of a new process. ``fail_fast``: the first trial to end in ERROR (past
        its ``max_failures``) ends the sweep at once: no trial is started any more and
        the others are stopped where they are (TERMINATED; a step in flight is dropped,
        no final checkpoint), so none records a result after the failure."""
        from orchestrator.api.sweep_port import ExperimentPort
        from orchestrator.api.sweep_result import SweepResult
        from orchestrator.sweeps.call import SweepCall
        from orchestrator.sweeps.preflight import plan_sweep

        exp = self._exp
        dispatcher, _ = exp.entered()
        running = exp.sweeps.get(name)
        if running is not None and not running.finished:
            raise ConfigError(f"sweep {name!r} is already running in experiment {self.name!r}")
        given = call_options(
            f"sweep {name!r}",
            options,
            stop=stop,
            checkpoint_every=checkpoint_every,
            resources=resources,
            max_failures=max_failures,
            keep_checkpoints=keep_checkpoints,
            checkpoint_score=checkpoint_score,
            result_buffer=result_buffer,
        )
        call = SweepCall(
            trainable,
            space,
            given,
            num_samples,
            metric,
            mode,
            searcher,
            scheduler,
            max_concurrent_trials,
            seed,
            name,
            reuse_actors,
            fail_fast,
        )
        sweep = plan_sweep(ExperimentPort(exp, dispatcher), call, exp.journaled_sweeps.get(name))
        exp.sweeps[name] = sweep
        trials = await sweep.run()
        await _give_back_freed_memory()
        return SweepResult(trials, metric, mode)

    def end_sweep(self, name: str = "sweep") -> None:
        """End the running sweep ``name`` now: it asks for no more trials and stops those
        that have not ended (TERMINATED, results and checkpoints kept); its ``sweep()``
        call returns once they are settled. For a stop rule over the whole population or
        a time budget, from a hook (sync ones run in threads: it is safe there), a task
        or a timer. A sweep that is not running: nothing."""
        sweep, dispatcher = self._exp.sweeps.get(name), self._exp.dispatcher
        loop = dispatcher.loop if dispatcher is not None else None
        if sweep is None or sweep.finished or loop is None:
            return
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            sweep.end()
        else:
            loop.call_soon_threadsafe(sweep.end)

    def run_sync(self) -> list[Trial]:
        """One call for plain scripts: enter, ``run()``, exit.

        Inside a running event loop (a Jupyter notebook, an ``async def``) it raises
        :class:`ConfigError` saying what to write there instead, and starts nothing.
        Running it there in a thread of its own would block the notebook's loop for the
        whole run, hooks and Ctrl-C included; ``await`` works in a notebook cell."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise ConfigError(
                f"experiment {self.name!r}: run_sync() cannot run inside a running event "
                "loop (a Jupyter notebook, or async code); there, write "
                "`async with orch: trials = await orch.run()`"
            )

        async def main() -> list[Trial]:
            async with self:
                return await self.run()

        return asyncio.run(main())

    def statistics(self) -> OrchestratorStatistics:
        dispatcher, hooks = self._exp.entered()
        assert self._opened is not None
        counts: dict[str, int] = {}
        for rt in self._exp.trials.values():
            state = rt.state.value
            counts[state] = counts.get(state, 0) + 1
        return OrchestratorStatistics(
            counts,
            dispatcher.statistics(),
            hooks.statistics(),
            self._opened.session.collector.statistics(),
        )

    # -- context manager ---------------------------------------------------------------

    async def __aenter__(self) -> Orchestrator:
        from orchestrator.api.session import enter

        if self._opened is not None:
            raise OrchestratorError(f"experiment {self.name!r}: this Orchestrator is already open")
        self._opened = await enter(self._exp)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        opened, self._opened = self._opened, None
        if opened is not None:
            await opened.close(exc)

    # -- internals ---------------------------------------------------------------------

    @property
    def _dispatcher(self) -> Dispatcher | None:
        """The session's loop while entered (for tests that look inside)."""
        return self._exp.dispatcher


async def _give_back_freed_memory() -> None:
    """Once a run or a sweep is over, return the C heap's free pages to the system, in
    a thread (issue 36: what its trials' actors and Ray's task bookkeeping held while it
    ran is freed by then, but glibc kept it: at 2,000 trivial trials on Ray the driver's
    RSS had grown by 7 to 10 KiB a trial, 1 to 2.5 KiB after this)."""
    from orchestrator.engine.c_heap import give_back_freed_memory

    await asyncio.to_thread(give_back_freed_memory)
