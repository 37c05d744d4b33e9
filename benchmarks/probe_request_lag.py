"""How long ``trial.pause()`` and ``trial.stop()`` take to land under adaptive result
buffering (the default), against one step per call.

With adaptive buffering a train call runs trivial steps back to back for about 20 ms,
so a request for a running trial waits for the call in flight. This probe runs 20
trivial trials (0.1 CPU each, a private ``ray.init(num_cpus=2)``), pauses each once
and then stops it, timing each request from the call to its return, and prints the
median and worst lag per mode.

Usage::

    python -m benchmarks.probe_request_lag            # adaptive and result_buffer=1
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from typing import Any

from orchestrator import Orchestrator, Trainable


class Trivial(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.i = 0

    def step(self) -> dict[str, Any]:
        self.i += 1
        return {"x": self.i}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(f"{checkpoint_dir}/i", "w") as fh:
            fh.write(str(self.i))

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        with open(f"{checkpoint_dir}/i") as fh:
            self.i = int(fh.read())


async def lags(result_buffer: int | None) -> dict[str, list[float]]:
    measured: dict[str, list[float]] = {"pause": [], "stop": []}
    with tempfile.TemporaryDirectory() as tmp:
        async with Orchestrator(
            storage=tmp,
            name="lag",
            result_buffer=result_buffer,
            num_cpus=2,
            progress=False,
            loggers=[],
            log_to_driver=False,
        ) as orch:
            trials = [
                orch.add_trial(Trivial, stop={"training_iteration": 10**8}, resources={"cpu": 0.1})
                for _ in range(20)
            ]
            runner = asyncio.create_task(orch.run())
            while not all(t.iteration > 200 for t in trials):
                await asyncio.sleep(0.05)
            for trial in trials:
                for what in ("pause", "stop"):
                    if what == "stop":
                        await trial.resume()
                        while trial.iteration < 50 + trial.checkpoints[-1].iteration:
                            await asyncio.sleep(0.01)
                    started = time.perf_counter()
                    await getattr(trial, what)()
                    measured[what].append(time.perf_counter() - started)
            await runner
    return measured


def main() -> int:
    for buffer in (None, 1):
        label = "adaptive" if buffer is None else f"result_buffer={buffer}"
        got = asyncio.run(lags(buffer))
        for what, values in got.items():
            print(
                f"{label:>16} {what:>5}: median {statistics.median(values) * 1000:6.1f} ms, "
                f"worst {max(values) * 1000:6.1f} ms over {len(values)}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
