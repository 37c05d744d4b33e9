"""Ray Tune's ``Tuner``: ``fit()`` runs the search as one trialflow sweep.

``Tuner(trainable, param_space=..., tune_config=..., run_config=...)`` checks every
argument at once (:mod:`orchestrator.tune.run_plan`); ``fit()`` opens an ``Orchestrator``
on ``<storage_path>/<name>`` (an existing run there is kept: this run is added beside
it, as on Tune), runs one ``sweep(...)`` with the translated arguments and returns a
``ResultGrid``. ``Tuner.restore(path, trainable)`` makes the same sweep call on the same
experiment with ``resume=True``: finished trials are kept, the others continue from
their newest checkpoints, and only the remaining samples are asked for.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from typing import Any, Literal

from orchestrator.core.locations import experiment_uri
from orchestrator.errors import like_cause
from orchestrator.tune import restoring, saved
from orchestrator.tune.adapters import engine_trainable, trainable_name, unwrap
from orchestrator.tune.config import RunConfig, TuneConfig
from orchestrator.tune.context import RunInfo
from orchestrator.tune.error import TuneError, unsupported
from orchestrator.tune.ray_configs import as_ours
from orchestrator.tune.result_grid import ResultGrid
from orchestrator.tune.run_plan import RunPlan, plan_run
from orchestrator.tune.schedulers.base import TuneScheduler
from orchestrator.tune.serializable import check_serializable
from orchestrator.tune.tune_hooks import TuneHooks

__all__ = ["Tuner"]

log = logging.getLogger("orchestrator.tune")


class Tuner:
    """Ray Tune's ``Tuner`` (see the module docstring)."""

    def __init__(
        self,
        trainable: Any = None,
        *,
        param_space: dict[str, Any] | None = None,
        tune_config: TuneConfig | None = None,
        run_config: RunConfig | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs:
            raise unsupported(f"Tuner({', '.join(kwargs)}=...)", "see tune.Tuner's arguments")
        if trainable is None:
            raise unsupported("Tuner() without a trainable", "pass a function or tune.Trainable")
        check_serializable(trainable)
        self._trainable = trainable
        self._param_space = param_space
        self._tune_config = as_ours(tune_config, TuneConfig) or TuneConfig()
        self._run_config = as_ours(run_config, RunConfig) or RunConfig()
        self._resume_errored: bool | Literal["restart"] = False
        self._restored_sweep: str | None = None
        self._plan = plan_run(trainable, param_space, self._tune_config, self._run_config)
        self._results: ResultGrid | None = None

    # -- Tune's API ------------------------------------------------------------------------

    def fit(self) -> ResultGrid:
        """Run the search to its end; the results of this run's trials."""
        grid: ResultGrid = saved._run(self._fit(self._plan))
        self._results = grid
        return grid

    def get_results(self) -> ResultGrid:
        """The results of ``fit()``; for a restored Tuner not fitted yet, what its
        experiment holds."""
        if self._results is not None:
            return self._results
        if self._restored_sweep is None:
            raise TuneError("get_results() needs fit() first (or Tuner.restore(path, ...))")
        return _recorded_results(self._plan, self._restored_sweep)

    @classmethod
    def can_restore(cls, path: str | os.PathLike[str], storage_filesystem: Any = None) -> bool:
        """Whether ``path`` holds a run of this facade that ``restore`` can continue (a
        run Ray Tune wrote cannot be: False, and a warning that says so)."""
        if not restoring.local_filesystem(storage_filesystem):
            raise unsupported("can_restore(storage_filesystem=...)", "give a path or URI")
        path = restoring.path_text(path)
        uri = experiment_uri(*saved.split(path))
        if saved.is_experiment(uri):
            return True
        if restoring.written_by_ray_tune(uri):
            restoring.warn_ray_tune(path)
        return False

    @classmethod
    def restore(
        cls,
        path: str | os.PathLike[str],
        trainable: Any,
        resume_unfinished: bool = True,
        resume_errored: bool = False,
        restart_errored: bool = False,
        param_space: dict[str, Any] | None = None,
        storage_filesystem: Any = None,
        _resume_config: Any = None,
    ) -> Tuner:
        """The Tuner of the run at ``path``; ``fit()`` continues it (see the module
        docstring). ``trainable`` is the run's (code and ``with_parameters`` objects are
        taken from here, not from the old driver); ``resume_errored`` retries trials that
        ended in ERROR from their newest checkpoints, ``restart_errored`` from scratch."""
        if not resume_unfinished:
            raise unsupported(
                "Tuner.restore(resume_unfinished=False)",
                "unfinished trials continue; stop them from a callback if they should not",
            )
        if not restoring.local_filesystem(storage_filesystem) or _resume_config is not None:
            raise unsupported("Tuner.restore(storage_filesystem/_resume_config)", "give a path")
        path, storage_path, name, uri = restoring.run_at(path, "Tuner.restore")
        if not saved.is_experiment(uri):
            raise TuneError(
                f"Tuner.restore: {path} is a trialflow experiment but not a Tuner's run (no "
                f"{saved.TUNER_KEY}); continue it with `python -m orchestrator resume` or "
                "Orchestrator(resume=True)"
            )
        document = saved.load(uri)
        restoring.check_same_run(path, document, trainable, param_space)
        check_serializable(trainable)
        run_config = document["run_config"]
        from dataclasses import replace

        run_config = replace(run_config, storage_path=storage_path, name=name)
        tuner = cls.__new__(cls)
        tuner._trainable = trainable
        tuner._param_space = param_space if param_space is not None else document["param_space"]
        tuner._tune_config = document["tune_config"]
        tuner._run_config = run_config
        tuner._resume_errored = "restart" if restart_errored else bool(resume_errored)
        tuner._restored_sweep = document["sweep_name"]
        tuner._plan = plan_run(
            trainable,
            tuner._param_space,
            tuner._tune_config,
            run_config,
            sweep_name=document["sweep_name"],
        )
        tuner._results = None
        return tuner

    # -- the run ---------------------------------------------------------------------------

    async def _fit(self, plan: RunPlan) -> ResultGrid:
        from orchestrator.api.orchestrator import Orchestrator

        uri = plan.experiment_path
        restoring = self._restored_sweep is not None
        exists = restoring or await asyncio.to_thread(saved.is_experiment, uri, tuner=False)
        hooks = TuneHooks(
            plan.callbacks,
            experiment_path=uri,
            local="://" not in uri,
            trainable_name=trainable_name(plan.trainable),
            name_creator=plan.name_creator,
            dirname_creator=plan.dirname_creator,
            prefix=plan.sweep_name + "_",
        )
        orch = Orchestrator(
            storage=plan.storage_path,
            name=plan.name,
            hooks=[hooks],
            resume=exists,
            resume_errored=self._resume_errored,
            progress=plan.progress,
        )
        async with orch:
            if not restoring:
                await saved.save(uri, self._document(plan))
            user, params, _ = unwrap(plan.wrapped)
            shape = plan.trial.resources
            resources = dict(shape) if isinstance(shape, Mapping) else None
            info = RunInfo(plan.name, uri, trainable_name(user), plan.name_creator, resources)
            engine = engine_trainable(user, info, params)

            def end() -> None:
                orch.end_sweep(plan.sweep_name)

            hooks.loop = asyncio.get_running_loop()
            if plan.stop.driver is not None and isinstance(plan.scheduler, TuneScheduler):
                plan.scheduler.attach_stopper(plan.stop.driver, end)
            budget = plan.stop.budget_s
            loop = asyncio.get_running_loop()
            timer = loop.call_later(budget, end) if budget is not None else None
            sweep = asyncio.ensure_future(
                orch.sweep(
                    engine,
                    plan.space,
                    plan.num_samples,
                    plan.metric,
                    plan.mode,
                    searcher=plan.searcher,
                    scheduler=plan.scheduler,
                    max_concurrent_trials=plan.max_concurrent,
                    options=plan.trial,
                    reuse_actors=plan.reuse_actors,
                    name=plan.sweep_name,
                    fail_fast=bool(plan.fail_fast),
                )
            )

            def abort() -> None:  # from a hook's thread
                loop.call_soon_threadsafe(sweep.cancel)

            hooks.abort = abort
            try:
                result = await sweep
            except asyncio.CancelledError:
                if hooks.failed is None:
                    raise
                raise hooks.failed from None  # closing the run keeps it resumable
            finally:
                hooks.abort = None
                if timer is not None:
                    timer.cancel()
        failed = [t.error for t in result.trials if t.state.value == "ERROR" and t.error]
        if plan.fail_fast == "raise" and failed:
            first = failed[0]
            cause = getattr(first, "cause", None) or first
            raise like_cause(TuneError, f"a trial failed (fail_fast='raise'): {first}", cause)
        return ResultGrid(
            result.trials,
            uri,
            plan.metric,
            plan.mode,
            plan.objectives,
            keep=_keep(plan),
            dirnames=hooks.dirnames,
        )

    def _document(self, plan: RunPlan) -> dict[str, Any]:
        return {
            "sweep_name": plan.sweep_name,
            "param_space": self._param_space,
            "tune_config": self._tune_config,
            "run_config": self._run_config,
            "trainable_name": trainable_name(plan.trainable),
        }


def _recorded_results(plan: RunPlan, sweep_name: str) -> ResultGrid:
    """A ResultGrid of what the experiment's journal holds for the run (no Ray)."""
    from orchestrator.tune.records import RecordedTrial

    record = saved.read_records(plan.experiment_path)
    trials = [
        RecordedTrial(t, plan.experiment_path)
        for t in (record.trials if record is not None else [])
        if t.id.startswith(sweep_name + "_")
    ]
    return ResultGrid(
        trials, plan.experiment_path, plan.metric, plan.mode, plan.objectives, keep=_keep(plan)
    )


def _keep(plan: RunPlan) -> tuple[int | None, tuple[str, str] | None]:
    return plan.trial.keep_checkpoints, plan.trial.checkpoint_score
