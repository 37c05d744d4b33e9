"""The core benchmark's ``ours-dash``: the dashboard open on the running experiment.

Two processes beside the driver, as a user who watches a run has them: the dashboard's
server (``python -m orchestrator dashboard`` on the experiment's storage) and a page
(:func:`watch`, run as ``python -m benchmarks._core_dashboard URL``) that does what the
experiment page's script does over the network: fetch the experiment's payload, then
hold its event stream open and parse every delta. Both start, and pay their start-up,
before the run's clock starts: the dashboard is open when the run begins. The page is
a Python client rather than Chromium: a browser usually runs on another machine than
the experiment, and Chromium's drawing here would measure the browser, not the
dashboard. The CPU both use during the run is reported beside the throughput, a figure
that load on the machine does not blur as it blurs throughput.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._core_common import RunSpec

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def watched(spec: RunSpec, storage: str, name: str = "bench") -> Iterator[dict[str, Any] | None]:
    """For ``ours-dash``, serve ``storage`` with the page of experiment ``name`` open for
    the block (None otherwise); the dict yielded holds, after the block, what the page
    received and the CPU seconds the server and the page used from the block's start."""
    if not spec.dashboard:
        yield None
        return
    import psutil

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "dashboard", "--storage", storage, "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    assert server.stdout is not None
    url = server.stdout.readline().split()[-1].rstrip("/")
    page = subprocess.Popen(
        [sys.executable, "-m", "benchmarks._core_dashboard", f"{url}/api/experiments/{name}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    assert page.stdout is not None
    page.stdout.readline()  # "ready": imported and asking for the experiment
    processes = {"server": psutil.Process(server.pid), "page": psutil.Process(page.pid)}
    start = {k: _cpu(p) for k, p in processes.items()}
    figures: dict[str, Any] = {}
    try:
        yield figures
    finally:
        for key, proc in processes.items():
            with contextlib.suppress(psutil.Error):
                figures[f"{key}_cpu_s"] = _cpu(proc) - start[key]
        page.send_signal(signal.SIGTERM)
        out, _ = page.communicate(timeout=60)
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=60)
        with contextlib.suppress(ValueError, IndexError):
            figures.update(json.loads(out.strip().splitlines()[-1]))


def _cpu(proc: Any) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


async def watch(api: str) -> None:
    """What the experiment page does: its payload (asked again until the experiment is
    listed), then its event stream, every delta parsed; on SIGTERM prints how many."""
    import aiohttp

    counts = {"deltas": 0, "payload_bytes": 0}
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("ready", flush=True)

    async def page() -> None:
        async with aiohttp.ClientSession() as http:
            while True:
                async with http.get(api) as response:
                    if response.status == 200:
                        body = await response.read()
                        counts["payload_bytes"] = len(body)
                        since = json.loads(body)["since"]
                        break
                await asyncio.sleep(0.2)
            stream = f"{api}/stream?since={since}"
            async with http.get(stream, timeout=aiohttp.ClientTimeout(total=None)) as response:
                async for line in response.content:
                    if line.startswith(b"data: "):
                        json.loads(line[6:])
                        counts["deltas"] += 1

    task = asyncio.get_running_loop().create_task(page())
    await stop.wait()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    asyncio.run(watch(sys.argv[1]))
