"""What the framework callbacks' tests share: one trial in a whole experiment on the
fake Ray, and one run through the facade on the real Ray whose trial fails once (its
training function leaves ``<marks>/failed``) and resumes from its checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator import Orchestrator, TrialState

CPU = {"cpu": 0.5}


async def run_one(
    train: Callable[..., Any],
    name: str,
    tmp_path: Path,
    fake_ray: Any,
    config: dict[str, Any],
    **options: Any,
) -> Any:
    """The trial, after it ran to TERMINATED; ``options`` go to ``add_trial``."""
    async with Orchestrator(
        storage=tmp_path, name=name, _ray_backend=fake_ray, progress=False
    ) as orch:
        trial = orch.add_trial(train, config, resources=CPU, **options)
        await orch.run()
    assert trial.state is TrialState.TERMINATED, trial.error
    return trial


def fit_failing_once_on_ray(
    train: Callable[..., Any], tmp_path: Path, name: str, metric: str, config: dict[str, Any]
) -> Any:
    """The facade's ``Result`` of one trial (``max_failures=1``) that failed once."""
    from orchestrator import tune

    grid = tune.Tuner(
        tune.with_resources(train, CPU),
        param_space=config,
        tune_config=tune.TuneConfig(metric=metric, mode="min"),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path),
            name=name,
            failure_config=tune.FailureConfig(max_failures=1),
            verbose=0,
        ),
    ).fit()
    assert not grid.errors
    assert (tmp_path / "failed").exists()
    return grid[0]
