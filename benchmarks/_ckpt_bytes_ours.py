"""``bench_checkpoint_bytes`` under trialflow's orchestrator (run in a child process).

The same child serves "ours" and "today": the parent sets
``TRIALFLOW_CHECKPOINT_DEDUP=0`` in today's environment, and every Ray process this
child starts inherits it. Storage is a local directory or the S3 emulator
(``storage="s3://..."``, ``storage_options`` with the endpoint; the credentials are in
the environment, which the workers inherit too).

After the workload, a **restore probe**: one more trial (no checkpoints of its own)
restores the newest checkpoint of the workload's trials one after another with
``Trial.restore``; each restore is timed from the call to its return (the checkpoint
fetched, verified and loaded, the trial training again), and split by the trainable's
stamps (``load_checkpoint`` started / ended).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from orchestrator import Orchestrator, Trainable
from orchestrator.schedulers import PBT
from orchestrator.search import grid, uniform

from ._ckpt_bytes_common import NUM_CPUS, ModelSteps, held_bytes, read_stamps, save_latencies, scan
from ._restore_common import BUCKET


class Model(ModelSteps, Trainable):
    """The shared model, as our ``Trainable``."""


class _Persisted:
    """``on_checkpoint``: when each checkpoint reached the driver; with local storage,
    the files of the committed checkpoint (see ``_ckpt_bytes_common.scan``), before a
    later exploit may delete them."""

    def __init__(self, root: str | None) -> None:
        self.root = root
        self.seen: dict[Any, tuple[int, str]] = {}
        self.events: list[tuple[str, int | None, float]] = []

    def on_checkpoint(self, trial: Any, checkpoint: Any) -> None:
        self.events.append((trial.id, checkpoint.iteration, time.time()))
        if self.root is not None and checkpoint.path is not None:
            scan(checkpoint.path, self.seen, committed_only=True)


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    local = spec["storage"] == "local"
    root = spec["root"]
    stamp_dir = spec["stamp_dir"]
    if local:
        storage: dict[str, Any] = {"storage": root}
    else:
        storage = {
            "storage": f"s3://{BUCKET}/{spec['prefix']}",
            "storage_options": {"endpoint_url": spec["endpoint"]},
        }
    hook = _Persisted(root if local else None)
    t0 = time.time()
    orch = Orchestrator(
        **storage, name="bytes", num_cpus=NUM_CPUS, log_to_driver=False, hooks=[hook]
    )
    async with orch:
        t_ray = time.time()
        base = dict(spec["model"], stamp_dir=stamp_dir, step_s=spec["step_s"])
        common: dict[str, Any] = {
            "stop": {"training_iteration": spec["iterations"]},
            "checkpoint_every": 1,
            "keep_checkpoints": None,
            "resources": {"cpu": spec["cpu"]},
            "seed": spec["seed"],
            "metric": "score",
            "mode": "max",
        }
        if spec["workload"] == "pbt":
            pbt = PBT(
                perturbation_interval=spec["interval"],
                hyperparam_mutations={"lr": uniform(0.001, 0.1)},
                seed=spec["seed"],
            )
            result = await orch.sweep(
                Model,
                {**base, "lr": uniform(0.001, 0.1)},
                num_samples=spec["trials"],
                scheduler=pbt,
                reuse_actors=True,
                **common,
            )
            exploits = len(pbt.lineage)
        else:
            lrs = [0.001 * (i + 1) for i in range(spec["trials"])]
            result = await orch.sweep(Model, {**base, "lr": grid(lrs)}, **common)
            exploits = 0
        t_end = time.time()
        errors = [repr(e) for e in result.errors]
        lasts = [t.last_result or {} for t in result.trials]
        workload_saves = list(hook.events)
        figures: dict[str, Any] = {}
        if local:  # what the workload wrote, before the probe writes its own
            scan(root, hook.seen, committed_only=False)
            files_held, bytes_held = held_bytes(root)
            figures.update(
                _local_bytes(root, hook.seen), files_held=files_held, bytes_held=bytes_held
            )
        else:  # what the bucket holds, before the probe's saves add to it
            from .bench_function_ckpt import _s3_usage

            held = await asyncio.to_thread(_s3_usage, spec["endpoint"], spec["prefix"])
            figures.update(objects_held=held[0], bytes_held=held[1])
        t_probe = time.time()
        probe_id, restore_s, fetch_s, load_s = await _probe(orch, result.trials, base, spec)
    stamps = read_stamps(stamp_dir)
    figures.update(
        ok=not errors and len(workload_saves) > 0 and len(restore_s) == spec["restores"],
        errors=errors[:3],
        ray_up_s=t_ray - t0,
        run_s=t_end - t_ray,
        t_probe=t_probe,
        trials=len(lasts),
        exploits=exploits,
        checkpoints_persisted=len(workload_saves),
        dedup_env_in_workers=sorted({str(r.get("dedup_env")) for r in lasts}),
        save_s=save_latencies(stamps, workload_saves),
        probe_save_s=save_latencies(stamps, [e for e in hook.events if e[0] == probe_id]),
        restore_s=restore_s,
        restore_fetch_s=fetch_s,
        restore_load_s=load_s,
    )
    return figures


def _local_bytes(root: str, seen: dict[Any, tuple[int, str]]) -> dict[str, Any]:
    from ._ckpt_bytes_common import is_checkpoint_path

    ckpt = sum(
        size for size, path in seen.values() if is_checkpoint_path(os.path.relpath(path, root))
    )
    return {
        "files_written": len(seen),
        "bytes_written": sum(size for size, _ in seen.values()),
        "checkpoint_bytes_written": ckpt,
    }


async def _probe(
    orch: Orchestrator, trials: Any, base: dict[str, Any], spec: dict[str, Any]
) -> tuple[str | None, list[float], list[float], list[float]]:
    """One more trial, alone on the cluster: restore each of the workload's newest
    checkpoints in turn (timed), then save (timed by the stamps and the hook) once it
    has trained a step on it, so the save holds a changed part as the workload's do."""
    sources = [t.latest_checkpoint for t in trials if t.latest_checkpoint is not None]
    sources = [sources[i % len(sources)] for i in range(spec["restores"])] if sources else []
    if not sources:
        return None, [], [], []
    probe = orch.add_trial(
        Model,
        {**base, "lr": 0.0, "step_s": 0.05},
        stop={"training_iteration": 10**9},
        resources={"cpu": spec["cpu"]},
    )
    running = asyncio.create_task(orch.run())
    timed: list[tuple[float, float]] = []
    try:
        while probe.iteration < 1 and not running.done():
            await asyncio.sleep(0.05)
        for checkpoint in sources:
            if running.done():
                break
            t = time.time()
            await probe.restore(checkpoint)
            timed.append((t, time.time()))
            await probe.save()
        await probe.stop()
    finally:
        await running
    loads = [s for s in read_stamps(base["stamp_dir"]) if s["trial"] == probe.id]
    restore_s, fetch_s, load_s = [], [], []
    for start, end in timed:
        began = next((s["t"] for s in loads if s["ev"] == "load_start" and s["t"] >= start), None)
        ended = next((s["t"] for s in loads if s["ev"] == "load_end" and s["t"] >= start), None)
        restore_s.append(end - start)
        if began is not None and ended is not None and ended <= end:
            fetch_s.append(began - start)
            load_s.append(ended - began)
    return probe.id, restore_s, fetch_s, load_s
