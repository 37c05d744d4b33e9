"""Per-call probe: the CPU one training step costs, by kind of actor.

``python -m benchmarks._core_percall [--calls 2000] [--actors 1]`` starts one Ray
(``num_cpus=2``), then for each kind of actor drives ``--actors`` actors with one
coroutine each, one awaited call per step (the raw loop's pattern), and reports wall
time and *CPU time* per step in the driver and in the actors. CPU time is what a
noisy machine distorts least, and what the orchestrator's design decides:

* ``sync``: a plain actor, ``def step()`` (the raw loop's);
* ``sync+io``: sync methods plus an ``io`` concurrency group (a threaded actor);
* ``async``: ``async def step()`` (Ray runs it on the actor's event loop thread);
* ``async+io``: the same plus one extra concurrency group, like the orchestrator's;
* ``ours``: the orchestrator's ``RemoteTrialActor.train_sole()`` (what the loop calls for
  an actor hosting one trial) on a trivial trainable;
* ``ours-buf10``: ``RemoteTrialActor.train_many(seq, 10)``, per result.

The driver here is a bare loop, so the orchestrator's own driver-side cost (loop.py,
lifecycle.py) is not in these figures: compare bench_core's driver CPU per result.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any

import ray

from ._core_common import NUM_CPUS
from ._shared import init_private_ray

KINDS = ("sync", "sync+io", "async", "async+io", "ours", "ours-buf10")


@ray.remote
class SyncStepper:
    def __init__(self) -> None:
        self.i = 0

    def step(self) -> dict[str, Any]:
        self.i += 1
        return {"x": self.i, "t": time.time()}

    def cpu(self) -> float:
        return time.process_time()


@ray.remote
class AsyncStepper:
    def __init__(self) -> None:
        self.i = 0

    async def step(self) -> dict[str, Any]:
        self.i += 1
        return {"x": self.i, "t": time.time()}

    async def cpu(self) -> float:
        return time.process_time()


@ray.remote(concurrency_groups={"io": 2})  # type: ignore[call-overload]
class AsyncIoStepper:
    def __init__(self) -> None:
        self.i = 0

    async def step(self) -> dict[str, Any]:
        self.i += 1
        return {"x": self.i, "t": time.time()}

    @ray.method(concurrency_group="io")
    async def cpu(self) -> float:
        return time.process_time()


@ray.remote(concurrency_groups={"io": 2})  # type: ignore[call-overload]
class SyncIoStepper:
    """A *threaded* actor: sync methods, plus an io group (a thread pool) for uploads."""

    def __init__(self) -> None:
        self.i = 0

    def step(self) -> dict[str, Any]:
        self.i += 1
        return {"x": self.i, "t": time.time()}

    @ray.method(concurrency_group="io")
    def cpu(self) -> float:
        return time.process_time()


class _Driven:
    """One actor and how to call one step on it."""

    def __init__(self, kind: str, cpu: float) -> None:
        self.kind = kind
        self.seq = 0
        self.per_call = 10 if kind == "ours-buf10" else 1
        if kind.startswith("ours"):
            from orchestrator.actor.trial_actor import RemoteTrialActor
            from orchestrator.core.stopping import StopCondition

            from ._core_ours import TrivialTrainable

            self.actor = RemoteTrialActor.options(num_cpus=cpu).remote(
                "/tmp/trialflow-percall-probe", {}
            )
            self.stop = StopCondition("probe", {"training_iteration": 10**9})
            self.trainable_cls = TrivialTrainable
        else:
            cls = {
                "sync": SyncStepper,
                "sync+io": SyncIoStepper,
                "async": AsyncStepper,
                "async+io": AsyncIoStepper,
            }[kind]
            self.actor = cls.options(num_cpus=cpu).remote()  # type: ignore[attr-defined]

    async def ready(self) -> None:
        if self.kind.startswith("ours"):
            self._next()
            await self.actor.setup.remote("probe", 1, self.trainable_cls, {}, self.stop)
        else:
            await self.actor.cpu.remote()

    def _next(self) -> int:
        seq = self.seq
        self.seq += 1
        return seq

    async def step(self) -> Any:
        if self.kind == "ours":
            self._next()
            return await self.actor.train_sole.remote()
        if self.kind == "ours-buf10":
            return await self.actor.train_many.remote("probe", self._next(), 10)
        return await self.actor.step.remote()

    async def cpu(self) -> float:
        if self.kind.startswith("ours"):
            # The trial actor has no CPU probe: read it from the process via psutil.
            import psutil

            pid = await self.actor.__ray_call__.remote(lambda _self: os.getpid())
            times = psutil.Process(pid).cpu_times()
            return float(times.user + times.system)
        value: float = await self.actor.cpu.remote()
        return value


async def _measure(kind: str, actors: int, calls: int, cpu: float) -> dict[str, float]:
    driven = [_Driven(kind, cpu) for _ in range(actors)]
    await asyncio.gather(*(d.ready() for d in driven))
    per_call = driven[0].per_call
    n = max(1, calls // per_call)

    async def loop(d: _Driven, count: int) -> None:
        for _ in range(count):
            await d.step()

    await asyncio.gather(*(loop(d, max(1, n // 10)) for d in driven))  # warm up
    before = [await d.cpu() for d in driven]
    d0, w0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(loop(d, n) for d in driven))
    wall, driver = time.perf_counter() - w0, time.process_time() - d0
    after = [await d.cpu() for d in driven]
    results = n * per_call * actors
    for d in driven:
        ray.kill(d.actor)
    return {
        "results_per_s": results / wall,
        "wall_us": wall / results * 1e6,
        "driver_cpu_us": driver / results * 1e6,
        "actor_cpu_us": sum(a - b for a, b in zip(after, before, strict=True)) / results * 1e6,
    }


async def _main(args: argparse.Namespace) -> None:
    kinds = [k for k in args.kinds.split(",") if k]
    init_private_ray(NUM_CPUS)
    rows: dict[str, list[dict[str, float]]] = {}
    for _ in range(args.repeat):
        for kind in kinds:
            rows.setdefault(kind, []).append(
                await _measure(kind, args.actors, args.calls, args.cpu)
            )
            print(kind, rows[kind][-1], flush=True)
    ray.shutdown()
    print(
        f"\n{args.actors} actor(s), {args.calls} steps each, one awaited call per step "
        f"(ours-buf10: per result); medians of {args.repeat}"
    )
    head = (
        f"{'kind':<11} {'results/s':>10} {'wall us':>8} {'driver cpu us':>14} {'actor cpu us':>13}"
    )
    print(head)
    print("-" * len(head))
    for kind, runs in rows.items():

        def m(field: str, runs: list[dict[str, float]] = runs) -> float:
            values = sorted(r[field] for r in runs)
            return values[len(values) // 2]

        print(
            f"{kind:<11} {m('results_per_s'):10.0f} {m('wall_us'):8.0f} "
            f"{m('driver_cpu_us'):14.0f} {m('actor_cpu_us'):13.0f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._core_percall")
    parser.add_argument("--calls", type=int, default=2000, help="steps per actor")
    parser.add_argument("--actors", type=int, default=1)
    parser.add_argument("--cpu", type=float, default=0.1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kinds", default=",".join(KINDS))
    asyncio.run(_main(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
