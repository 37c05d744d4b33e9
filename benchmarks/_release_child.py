"""One ``bench_release`` run in this (fresh) process: one workload on one system.

``python -m benchmarks._release_child '<spec as JSON>'``. The workload is written once
against a module named ``tune``: ``ray.tune`` for Ray Tune, ``orchestrator.tune`` (the
facade) for ours, so both run the same script. Each run starts a private Ray with
``spec["cpus"]`` logical CPUs first and times only the ``tune.run(...)`` call, as Ray's
release tests do (their Ray is up before the clock starts).

The trainables follow what Ray's release tests measure (our own code): a function
trainable reporting ``iters`` results, one every ``sleep_s`` seconds, and for the
durable workload a class trainable whose steps sleep and whose checkpoints are
``ckpt_bytes`` of random float64s, checkpointed every ``ckpt_every`` steps.
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import sys
import time
from collections import Counter
from typing import Any

from ._shared import init_private_ray
from ._sweep_common import emit_figures

PACKAGES = {"tune": "ray.tune", "ours": "orchestrator.tune"}


def make_trainables(tune: Any) -> tuple[Any, Any]:
    """The function trainable and the durable class trainable, on ``tune``'s API.

    Defined in here so that each closes over its system's module (pickled by value)."""

    def reporting(config: dict[str, Any]) -> None:
        # Report first, then sleep: a trial lasts iters x sleep_s plus its own overhead.
        # Each result says when the first was reported and when it was (wall clock), so
        # a trial's start and its time per result are read from its last result.
        first = None
        for i in range(config["iters"]):
            now = time.time()
            first = first or now
            tune.report({"score": i + config["score"], "first_at": first, "at": now})
            time.sleep(config["sleep_s"])

    class Durable(tune.Trainable):  # type: ignore[misc,name-defined]
        def setup(self, config: dict[str, Any]) -> None:
            self.iters, self.sleep_s = config["iters"], config["sleep_s"]
            self.items, self.score, self.done = config["ckpt_bytes"] // 8, config["score"], 0

        def step(self) -> dict[str, Any]:
            time.sleep(self.sleep_s)
            self.done += 1
            return {"score": self.done + self.score, "done": self.done >= self.iters}

        def save_checkpoint(self, checkpoint_dir: str) -> None:
            import numpy as np

            with open(os.path.join(checkpoint_dir, "weights.pkl"), "wb") as f:
                pickle.dump(np.random.uniform(0, 1, size=self.items), f)

        def load_checkpoint(self, checkpoint: Any) -> None:
            pass

    return reporting, Durable


def _storage(spec: dict[str, Any]) -> dict[str, Any]:
    """Where the durable workload writes: the S3 emulator, as each system spells it."""
    if spec["system"] == "ours":  # the endpoint from $AWS_ENDPOINT_URL (set by the parent)
        return {"storage_path": f"s3://{spec['bucket']}/{spec['prefix']}"}
    from ._restore_common import s3_filesystem

    return {
        "storage_path": f"{spec['bucket']}/{spec['prefix']}",
        "storage_filesystem": s3_filesystem(spec["endpoint"]),
    }


def _bare_trial(spec: dict[str, Any]) -> None:
    """One trial's own work with no system around it: the sleeps, and for the durable
    workload the checkpoint files written locally (nothing uploaded)."""
    import tempfile

    import numpy as np

    with tempfile.TemporaryDirectory(prefix="bench-release-bare-") as tmp:
        for i in range(spec["iters"]):
            time.sleep(spec["sleep_s"])
            if spec.get("ckpt_every") and (i + 1) % spec["ckpt_every"] == 0:
                with open(os.path.join(tmp, "weights.pkl"), "wb") as f:
                    pickle.dump(np.random.uniform(0, 1, size=spec["ckpt_bytes"] // 8), f)


def run_bare(spec: dict[str, Any]) -> dict[str, Any]:
    """The machine's floor under its current load: the trials' work in plain processes,
    as many at once as the workload runs, no Ray and no tuning system."""
    import multiprocessing

    concurrency = spec["cpus"] // spec["cpu_per_trial"]
    started = time.monotonic()
    with multiprocessing.get_context("fork").Pool(concurrency) as pool:
        pool.map(_bare_trial, [spec] * spec["trials"], chunksize=1)
    return {"ok": True, "wall_s": time.monotonic() - started, "states": {}}


def run(spec: dict[str, Any]) -> dict[str, Any]:
    if spec["system"] == "bare":
        return run_bare(spec)
    for key, value in spec.get("tune_env", {}).items():  # Tune's own tweaks per test
        os.environ[key] = value
    init_private_ray(spec["cpus"])
    tune = importlib.import_module(PACKAGES[spec["system"]])
    reporting, durable = make_trainables(tune)
    config = {
        "score": tune.uniform(0.0, 1.0),
        "iters": spec["iters"],
        "sleep_s": spec["sleep_s"],
        "ckpt_bytes": spec.get("ckpt_bytes", 0),
    }
    kwargs: dict[str, Any] = {
        "config": config,
        "num_samples": spec["trials"],
        "resources_per_trial": {"cpu": spec["cpu_per_trial"]},
        "reuse_actors": True,
        "raise_on_failed_trial": False,
        "verbose": 0,
        "name": spec["workload"],
    }
    trainable = reporting
    if spec["workload"] == "durable_trainable":
        trainable = durable
        kwargs.update(
            checkpoint_freq=spec["ckpt_every"], keep_checkpoints_num=spec["keep"], **_storage(spec)
        )
    else:
        kwargs["storage_path"] = spec["local_dir"]
    started, started_at = time.monotonic(), time.time()
    analysis = tune.run(trainable, **kwargs)
    wall = time.monotonic() - started
    states = dict(Counter(str(getattr(t, "status", "?")) for t in analysis.trials))
    figures = {"ok": states == {"TERMINATED": spec["trials"]}, "wall_s": wall, "states": states}
    return {**figures, **_pace(analysis.trials, started_at, spec)}


def _pace(trials: Any, started_at: float, spec: dict[str, Any]) -> dict[str, Any]:
    """For the reporting workloads: when the trials' first results came (median, from
    the start of ``tune.run``) and their wall time per result after it (median): the
    start-up and the per-result cost, apart. Nothing for the durable workload."""
    import statistics

    lasts = [getattr(t, "last_result", None) or {} for t in trials]
    lasts = [r for r in lasts if "at" in r and "first_at" in r]
    if spec["workload"] == "durable_trainable" or not lasts or spec["iters"] < 2:
        return {}
    return {
        "first_result_s": statistics.median(r["first_at"] - started_at for r in lasts),
        "per_result_ms": statistics.median(
            (r["at"] - r["first_at"]) / (spec["iters"] - 1) * 1000 for r in lasts
        ),
    }


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    import ray  # noqa: F401  (its import out of the clock)

    emit_figures(run(spec))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
