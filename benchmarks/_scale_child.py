"""One ``bench_scale`` run in this (fresh) process: N trivial trials, its figures printed.

``python -m benchmarks._scale_child '<spec as JSON>'``; ``spec["system"]`` is ``ours``
(real Ray), ``fake`` (ours on the tests' in-process fake Ray: the engine's own cost,
no Ray processes) or ``tune``. The sweep is ``bench_sweep``'s (same trainable, same
figures), with the driver's peak RSS added.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import tempfile
import time
from typing import Any

from ._sweep_common import emit_figures, rss_bytes


async def _fake(spec: dict[str, Any]) -> dict[str, Any]:
    """Ours on ``tests/support/fakeray.py``: the same sweep as ``_sweep_ours`` runs on Ray."""
    from orchestrator import Orchestrator
    from orchestrator.search import uniform
    from tests.support.fakeray import FakeRay

    from ._sweep_figures import last_of
    from ._sweep_ours import SleepyTrainable

    with tempfile.TemporaryDirectory(prefix="bench-scale-fake-") as tmp:
        fake = FakeRay(f"{tmp}/nodes")
        async with Orchestrator(
            _ray_backend=fake, storage=tmp, name="bench", log_to_driver=False, progress=False
        ) as orch:
            # A few trials first: the imports and pools the first trials bring are not
            # the per-trial cost (Ray's own start-up is left out the same way).
            await orch.sweep(
                SleepyTrainable,
                {"step_s": 0},
                num_samples=spec["concurrency"],
                stop={"training_iteration": 1},
                resources={"cpu": spec["cpu"]},
                name="warm-up",
            )
            t0 = time.time()
            cpu0 = time.process_time()  # this process: the driver and the fake actors
            rss0 = rss_bytes()
            journal = orch._exp.journal
            assert journal is not None
            writes0, written0 = journal.writes, journal.bytes_written
            result = await orch.sweep(
                SleepyTrainable,
                {"x": uniform(0, 1), "step_s": 0},
                num_samples=spec["trials"],
                metric="score",
                mode="max",
                max_concurrent_trials=spec["concurrency"],
                stop={"training_iteration": spec["steps"]},
                resources={"cpu": spec["cpu"]},
                seed=spec.get("seed"),
            )
            t_end = time.time()
            cpu = time.process_time() - cpu0
            rss1 = rss_bytes()
            done = [last_of(t.last_result)[0] for t in result.trials]
            journal = orch._exp.journal  # what its writes cost storage (issue 36)
            assert journal is not None
            writes, written = journal.writes - writes0, journal.bytes_written - written0
            head_bytes = journal.head_bytes
            # The sweep's document, what every write stores of it (issue 36).
            sweep_doc = len(json.dumps(orch._exp.journal_extras()))
        fake.close()
    return {
        "ok": sum(done) == spec["trials"] * spec["steps"] and not result.errors,
        "after_ray_s": t_end - t0,
        "driver_cpu_s": cpu,
        "rss_after_ray_mib": rss0 / 2**20,
        "rss_end_mib": rss1 / 2**20,
        "journal_writes": writes,
        "journal_kib_per_write": written / max(writes, 1) / 1024,
        "journal_head_kib": head_bytes / 1024,
        "journal_sweep_doc_kib": sweep_doc / 1024,
    }


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    import ray  # noqa: F401  (its import out of the clocks, as in bench_sweep)

    if spec["system"] == "fake":
        figures = asyncio.run(_fake(spec))
    elif spec["system"] == "ours":
        from . import _sweep_ours

        figures = asyncio.run(_sweep_ours.run(spec))
    else:
        from . import _sweep_tune

        figures = _sweep_tune.run(spec)
    # Linux: KiB. The whole process's peak (Ray's start included, as the issue measured).
    figures["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    emit_figures(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
