"""``bench_checkpoint_bytes`` under Ray Tune, same Ray (a child process).

The shared model as a ``tune.Trainable``; ``PopulationBasedTraining`` (PBT) or a
``tune.grid_search`` over ``lr`` (fine-tuning); ``CheckpointConfig(checkpoint_frequency=1,
num_to_keep=None)``: every checkpoint kept, as ours. Storage: a local ``storage_path``,
or the S3 emulator through ``storage_filesystem=pyarrow.fs.S3FileSystem(endpoint_override
=...)``. A ``Callback.on_checkpoint`` stamps when each checkpoint reached the driver.
Tune has no call that restores a checkpoint into a running trial, so no restore probe.
"""

from __future__ import annotations

import random
import time
from typing import Any

import ray
from ray import tune
from ray.tune.schedulers import PopulationBasedTraining

from ._ckpt_bytes_common import NUM_CPUS, ModelSteps, held_bytes, read_stamps, save_latencies, scan
from ._restore_common import BUCKET, s3_filesystem
from ._shared import init_private_ray


class TuneModel(ModelSteps, tune.Trainable):
    """The shared model, as Tune's ``Trainable``."""


class _Persisted(tune.Callback):
    def __init__(self) -> None:
        self.events: list[tuple[str, int | None, float]] = []

    def on_checkpoint(
        self, iteration: int, trials: Any, trial: Any, checkpoint: Any, **info: Any
    ) -> None:
        last = trial.last_result or {}
        it = last.get("training_iteration")
        self.events.append((trial.trial_id, int(it) if it is not None else None, time.time()))


def run(spec: dict[str, Any]) -> dict[str, Any]:
    import os

    local = spec["storage"] == "local"
    stamp_dir = spec["stamp_dir"]
    random.seed(spec["seed"])  # Tune's PBT draws from the driver's `random`
    t0 = time.time()
    init_private_ray(NUM_CPUS)
    t_ray = time.time()
    base = dict(spec["model"], stamp_dir=stamp_dir, step_s=spec["step_s"])
    hook = _Persisted()
    if spec["workload"] == "pbt":
        scheduler: Any = PopulationBasedTraining(
            time_attr="training_iteration",
            perturbation_interval=spec["interval"],
            hyperparam_mutations={"lr": tune.uniform(0.001, 0.1)},
        )
        space = {**base, "lr": tune.uniform(0.001, 0.1)}
        samples = spec["trials"]
    else:
        scheduler = None
        space = {**base, "lr": tune.grid_search([0.001 * (i + 1) for i in range(spec["trials"])])}
        samples = 1
    storage: dict[str, Any] = (
        {"storage_path": spec["root"]}
        if local
        else {
            "storage_path": f"{BUCKET}/{spec['prefix']}",
            "storage_filesystem": s3_filesystem(spec["endpoint"]),
        }
    )
    tuner = tune.Tuner(
        tune.with_resources(TuneModel, {"cpu": spec["cpu"]}),
        param_space=space,
        tune_config=tune.TuneConfig(
            scheduler=scheduler,
            metric="score",
            mode="max",
            num_samples=samples,
            reuse_actors=True,
        ),
        run_config=tune.RunConfig(
            name="bytes",
            stop={"training_iteration": spec["iterations"]},
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1, num_to_keep=None),
            callbacks=[hook],
            verbose=0,
            **storage,
        ),
    )
    grid = tuner.fit()
    t_end = time.time()
    results = [grid[i] for i in range(len(grid))]
    errors = [repr(r.error) for r in results if r.error is not None]
    exploits = getattr(scheduler, "_num_perturbations", 0) if scheduler is not None else 0
    ray.shutdown()
    figures: dict[str, Any] = {
        "ok": not errors and len(hook.events) > 0,
        "errors": errors[:3],
        "ray_up_s": t_ray - t0,
        "run_s": t_end - t_ray,
        "trials": len(results),
        "exploits": exploits,
        "checkpoints_persisted": len(hook.events),
        "save_s": save_latencies(read_stamps(stamp_dir), hook.events),
        "restore_s": [],
        "restore_fetch_s": [],
        "restore_load_s": [],
    }
    if local:
        from ._ckpt_bytes_common import is_checkpoint_path

        seen: dict[Any, tuple[int, str]] = {}
        scan(spec["root"], seen, committed_only=False)  # Tune deletes nothing: all is here
        files_held, bytes_held = held_bytes(spec["root"])
        figures.update(
            files_written=len(seen),
            bytes_written=sum(size for size, _ in seen.values()),
            checkpoint_bytes_written=sum(
                size
                for size, path in seen.values()
                if is_checkpoint_path(os.path.relpath(path, spec["root"]))
            ),
            files_held=files_held,
            bytes_held=bytes_held,
        )
    return figures
