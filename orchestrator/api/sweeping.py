"""``Orchestrator.sweep`` and ``Orchestrator.end_sweep``: a population of trials that a
searcher proposes and a scheduler judges, run inside the experiment.

:class:`Sweeping` is a base of :class:`~orchestrator.api.orchestrator.Orchestrator`
(whose own module holds the experiment's arguments, its trials, ``run`` and ``async
with``); the sweep itself is :mod:`orchestrator.sweeps`, reached through the
experiment's port (:mod:`orchestrator.api.sweep_port`). Like that module, this one
imports the driver's machinery only in the methods that use it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.core.options import ResourcesSpec, TrialOptions, call_options
from orchestrator.core.stopping import StopSpec
from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from orchestrator.api.experiment import Experiment
    from orchestrator.api.sweep_result import SweepResult
    from orchestrator.core.checkpoints import ScoreMode
    from orchestrator.schedulers import Scheduler
    from orchestrator.search import Searcher

__all__ = ["Sweeping"]


class Sweeping:
    """The sweep methods of :class:`~orchestrator.api.orchestrator.Orchestrator`, which
    sets ``_exp``."""

    _exp: Experiment

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
        from orchestrator.api.experiment import give_back_memory
        from orchestrator.api.sweep_port import ExperimentPort
        from orchestrator.api.sweep_result import SweepResult
        from orchestrator.sweeps.call import SweepCall
        from orchestrator.sweeps.preflight import plan_sweep

        exp = self._exp
        dispatcher, _ = exp.entered()
        running = exp.sweeps.get(name)
        if running is not None and not running.finished:
            raise ConfigError(f"sweep {name!r} is already running in experiment {self._exp.name!r}")
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
        await give_back_memory()
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
