"""Weights & Biases as a trialflow hook: one W&B run per trial (see
:mod:`orchestrator.integrations.tracker` for what the hook promises).

A trial's run id is derived from the project, the group and the trial's id
(:func:`run_id_for`), so a trial restarted, resumed or run again by a new driver resumes
its run (``resume="allow"``); the config is the run's config; each result is one step
(``step=training_iteration``). W&B's steps only grow, and an offline run does not know
the steps an earlier process logged: the hook keeps the last step it logged per run in
``<dir>/wandb/trialflow-steps/<run id>.json``. W&B is imported by the worker thread, when
the first trial starts; ``WANDB_MODE=offline`` (or ``mode="offline"``) writes the runs
under ``<dir>/wandb/`` for ``wandb sync``.

    from orchestrator.integrations.wandb import WandbHook
    Orchestrator(..., hooks=[WandbHook(project="mnist", group="lr-sweep")])
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from orchestrator.integrations.backend import RunHandle, TrialRun
from orchestrator.integrations.tracker import TrackerHook

__all__ = ["WandbBackend", "WandbHook", "run_id_for"]


def run_id_for(project: str | None, group: str | None, trial_id: str) -> str:
    """The W&B run id of a trial: the same for the same project, group and trial."""
    digest = hashlib.sha256(f"{project or ''}\0{group or ''}\0{trial_id}".encode()).hexdigest()
    return digest[:24]


class WandbBackend:
    """Runs in the tracker hook's worker thread only (``wandb.init`` may block)."""

    def __init__(
        self,
        project: str | None = None,
        *,
        group: str | None = None,
        dir: str | os.PathLike[str] | None = None,
        mode: str | None = None,
        api_key: str | None = None,
        init_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.project = project
        self.group = group
        self.dir = os.path.abspath(os.fspath(dir)) if dir is not None else os.getcwd()
        self.mode = mode
        self.api_key = api_key
        self.init_kwargs = dict(init_kwargs or {})
        self.label = f"W&B project {project or '(default)'}"

    def open(self, trial: TrialRun) -> RunHandle:
        import wandb

        if self.api_key:
            os.environ.setdefault("WANDB_API_KEY", self.api_key)
        run_id = run_id_for(self.project, self.group, trial.trial_id)
        os.makedirs(self.dir, exist_ok=True)
        kwargs: dict[str, Any] = {
            "project": self.project,
            "group": self.group,
            "name": trial.name,
            "id": run_id,
            "resume": "allow",
            "config": dict(trial.config),
            "dir": self.dir,
            "reinit": "create_new",
            "settings": wandb.Settings(console="off", silent=True),
            **self.init_kwargs,
        }
        if self.mode is not None:
            kwargs["mode"] = self.mode
        run = wandb.init(**kwargs)
        run.config.update({"trial_id": trial.trial_id}, allow_val_change=True)  # type: ignore[no-untyped-call]
        step = max(self._stored_step(run_id), _int(getattr(run, "starting_step", 0)) - 1)
        return RunHandle(run, step=max(step, 0), extra={"id": run_id})

    def log(self, handle: RunHandle, rows: list[tuple[int, dict[str, float]]]) -> None:
        # Committed at once: W&B otherwise holds a step's row until a later step comes,
        # so a driver killed then lost its last step while the steps file counted it.
        for step, metrics in rows:
            handle.run.log(metrics, step=step, commit=True)
        self._store_step(handle.extra["id"], rows[-1][0])

    def set_config(self, handle: RunHandle, config: Mapping[str, Any]) -> None:
        handle.run.config.update(dict(config), allow_val_change=True)

    def finish(self, handle: RunHandle, status: str, artifact_dir: str | None) -> None:
        if artifact_dir is not None and os.path.isdir(artifact_dir):
            import wandb

            artifact = wandb.Artifact(f"trial-{handle.extra['id']}", type="trial")
            artifact.add_dir(artifact_dir)
            handle.run.log_artifact(artifact)
        handle.run.finish(exit_code=0 if status == "FINISHED" else 1)

    def close(self) -> None:
        return None

    def _steps_file(self, run_id: str) -> str:
        return os.path.join(self.dir, "wandb", "trialflow-steps", f"{run_id}.json")

    def _stored_step(self, run_id: str) -> int:
        try:
            with open(self._steps_file(run_id)) as file:
                return _int(json.load(file).get("step"))
        except (OSError, ValueError, AttributeError):
            return 0

    def _store_step(self, run_id: str, step: int) -> None:
        path = self._steps_file(run_id)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w") as file:
            json.dump({"step": step}, file)
        os.replace(path + ".tmp", path)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class WandbHook(TrackerHook):
    """A :class:`~orchestrator.integrations.tracker.TrackerHook` sending each trial to
    Weights & Biases. ``dir`` holds ``wandb/`` (default: the working directory);
    ``init_kwargs`` go to ``wandb.init`` (``entity``, ``tags``, ``notes``...)."""

    def __init__(
        self,
        project: str | None = None,
        *,
        group: str | None = None,
        dir: str | os.PathLike[str] | None = None,
        mode: str | None = None,
        api_key: str | None = None,
        init_kwargs: Mapping[str, Any] | None = None,
        run_name: Callable[[Any], str] | None = None,
        artifact_dir: Callable[[Any], str | None] | None = None,
        excludes: Sequence[str] = (),
        max_pending: int = 10_000,
        close_grace: float = 10.0,
    ) -> None:
        super().__init__(
            WandbBackend(
                project, group=group, dir=dir, mode=mode, api_key=api_key, init_kwargs=init_kwargs
            ),
            run_name=run_name,
            artifact_dir=artifact_dir,
            excludes=excludes,
            max_pending=max_pending,
            close_grace=close_grace,
        )
