"""Start-up probe: how long N actors take to come up, by kind of actor and Ray setting.

``python -m benchmarks._core_startup [--actors 20] [--repeat 1]`` starts, in a fresh
process each, ``ray.init(num_cpus=2)`` and then N actors at 0.1 CPU, and times each
actor's first call. The actor kinds isolate what the orchestrator's actor costs:

* ``sync``: a plain ``@ray.remote`` class (the raw loop's actor);
* ``async``: the same with an ``async def`` method (an async actor: an event loop thread);
* ``async+io``: an async actor with one extra concurrency group, as the orchestrator's;
* ``ours``: the orchestrator's ``RemoteTrialActor`` hosting a trivial trainable, first
  call ``setup`` (imports ``orchestrator`` and ``storage`` in the worker).

``--startup-concurrency`` runs each kind again with Ray's
``worker_maximum_startup_concurrency`` (default: the node's CPU count, 2 here).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import ray

from ._core_common import NUM_CPUS, RESULT_MARKER, CpuSampler, median, parse_child_output

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("sync", "async", "async+io", "ours")


@ray.remote
class SyncActor:
    def ping(self) -> float:
        return time.time()


@ray.remote
class AsyncActor:
    async def ping(self) -> float:
        return time.time()


@ray.remote(concurrency_groups={"io": 2})  # type: ignore[call-overload]
class AsyncIoActor:
    async def ping(self) -> float:
        return time.time()

    @ray.method(concurrency_group="io")
    async def other(self) -> None:
        return None


def _create(kind: str, n: int, cpu: float) -> list[Any]:
    refs: list[Any] = []
    if kind == "ours":
        from orchestrator.actor.trial_actor import RemoteTrialActor
        from orchestrator.core.stopping import StopCondition

        from ._core_ours import TrivialTrainable

        for i in range(n):
            trial_id = f"probe_{i:05d}"
            actor = RemoteTrialActor.options(
                num_cpus=cpu, max_restarts=0, max_task_retries=0
            ).remote("/tmp/trialflow-startup-probe", {})
            stop = StopCondition(trial_id, {"training_iteration": 10})
            refs.append((actor, actor.setup.remote(trial_id, 1, TrivialTrainable, {}, stop)))
        return refs
    cls = {"sync": SyncActor, "async": AsyncActor, "async+io": AsyncIoActor}[kind]
    for _ in range(n):
        actor = cls.options(num_cpus=cpu).remote()  # type: ignore[attr-defined]
        refs.append((actor, actor.ping.remote()))
    return refs


async def _probe(kind: str, n: int, cpu: float, concurrency: int) -> dict[str, Any]:
    system_config: dict[str, Any] = {}
    if concurrency:
        system_config["worker_maximum_startup_concurrency"] = concurrency
    t0 = time.time()
    sampler = CpuSampler(interval=0.2)
    ray.init(
        address="local",  # a private cluster, never one already running here
        num_cpus=NUM_CPUS,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.WARNING,
        _system_config=system_config or None,
    )
    t_ray = time.time()
    pairs = _create(kind, n, cpu)
    t_created = time.time()
    ready: list[float] = []

    async def one(ref: Any) -> None:
        await ref
        ready.append(time.time())

    await asyncio.gather(*(one(ref) for _, ref in pairs))
    t_all = time.time()
    cpu_s = sampler.stop()
    # The steady per-call round trip once up, for one actor, sequentially.
    # (ours: the train call, with its sequence numbers, as the loop issues it).
    actor = pairs[0][0]
    start = time.perf_counter()
    for seq in range(1, 201):
        await (actor.train.remote("probe_00000", seq) if kind == "ours" else actor.ping.remote())
    round_trip = (time.perf_counter() - start) / 200
    ray.shutdown()
    ready.sort()
    return {
        "kind": kind,
        "concurrency": concurrency,
        "actors": n,
        "ray_up_s": t_ray - t0,
        "submit_s": t_created - t_ray,
        "first_ready_s": ready[0] - t_ray,
        "half_ready_s": ready[len(ready) // 2] - t_ray,
        "all_ready_s": t_all - t_ray,
        "round_trip_ms": round_trip * 1e3,
        # CPU seconds until every actor answered, per actor, by process kind.
        "worker_cpu_s": cpu_s.get("workers", 0.0) / n,
        "driver_cpu_s": cpu_s["driver"] / n,
        "raylet_gcs_cpu_s": (cpu_s.get("raylet", 0.0) + cpu_s.get("gcs", 0.0)) / n,
        "worker_procs": cpu_s.get("workers_n", 0.0),
    }


def _child(argv: list[str]) -> int:
    kind, n, cpu, concurrency = argv[0], int(argv[1]), float(argv[2]), int(argv[3])
    figures = asyncio.run(_probe(kind, n, cpu, concurrency))
    sys.stdout.write(RESULT_MARKER + json.dumps(figures) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._core_startup")
    parser.add_argument("--actors", type=int, default=20)
    parser.add_argument("--cpu", type=float, default=0.1)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument(
        "--startup-concurrency",
        default="0",
        help="comma-separated worker_maximum_startup_concurrency values (0: Ray's default)",
    )
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    levels = [int(c) for c in args.startup_concurrency.split(",") if c]
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    env.setdefault("RAY_AUTH_MODE", "disabled")
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    rows: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for _ in range(args.repeat):
        for level in levels:
            for kind in kinds:
                command = [
                    sys.executable,
                    "-m",
                    "benchmarks._core_startup",
                    "--child",
                    kind,
                    str(args.actors),
                    str(args.cpu),
                    str(level),
                ]
                proc = subprocess.run(
                    command, cwd=ROOT, env=env, capture_output=True, text=True, check=False
                )
                figures = parse_child_output(proc.stdout)
                if figures is None:
                    print(f"{kind} (concurrency {level}) failed:\n{proc.stderr[-2000:]}")
                    continue
                print(json.dumps(figures), flush=True)
                rows.setdefault((kind, level), []).append(figures)
    print(f"\n{args.actors} actors at {args.cpu} CPU on ray.init(num_cpus={NUM_CPUS}); medians")
    head = (
        f"{'kind':<9} {'conc':>4} {'ray up s':>9} {'first s':>8} {'half s':>7} "
        f"{'all s':>7} {'call ms':>8} {'wkr cpu/actor':>13} {'drv cpu/actor':>13} "
        f"{'raylet+gcs cpu/actor':>20} {'procs':>5}"
    )
    print(head)
    print("-" * len(head))
    for (kind, level), runs in rows.items():

        def m(field: str, runs: list[dict[str, Any]] = runs) -> float:
            value = median([r[field] for r in runs])
            return float("nan") if value is None else value

        print(
            f"{kind:<9} {level or 'dflt':>4} {m('ray_up_s'):9.2f} {m('first_ready_s'):8.2f} "
            f"{m('half_ready_s'):7.2f} {m('all_ready_s'):7.2f} {m('round_trip_ms'):8.2f} "
            f"{m('worker_cpu_s'):13.3f} {m('driver_cpu_s'):13.3f} "
            f"{m('raylet_gcs_cpu_s'):20.3f} {m('worker_procs'):5.0f}"
        )
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(_child(sys.argv[2:]))
    sys.exit(main())
