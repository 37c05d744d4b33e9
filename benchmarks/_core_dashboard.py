"""The core benchmark's ``ours-dash``: the dashboard open on the running experiment.

Two processes beside the driver, as a user who watches a run has them: the dashboard's
server (``python -m orchestrator dashboard`` on the experiment's storage) and a page
(:func:`watch`, run as ``python -m benchmarks._core_dashboard URL``) that does what the
experiment page's script does over the network: fetch the experiment's payload, then
hold its event stream open and parse every delta, until it is stopped. The page is a
Python client rather than Chromium: a browser usually runs on another machine than the
experiment, and Chromium's rendering here would measure the browser, not the dashboard.
Both are children of the driver, so the benchmark's CPU sampler counts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextlib.asynccontextmanager
async def dashboard_open(storage: str, name: str) -> AsyncIterator[dict[str, int]]:
    """Serve ``storage`` and keep the page of experiment ``name`` open for the block;
    yields a dict that holds, after the block, ``deltas`` (events the page received)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "orchestrator", "dashboard", "--storage", storage, "--port", "0",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env, cwd=ROOT,
    )  # fmt: skip
    assert server.stdout is not None
    url = (await server.stdout.readline()).decode().split()[-1].rstrip("/")
    page = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks._core_dashboard", f"{url}/api/experiments/{name}",
        stdout=asyncio.subprocess.PIPE, env=env, cwd=ROOT,
    )  # fmt: skip
    figures: dict[str, int] = {}
    try:
        yield figures
    finally:
        for proc in (page, server):
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        out, _ = await page.communicate()
        await server.wait()
        with contextlib.suppress(ValueError, IndexError):
            figures.update(json.loads(out.decode().strip().splitlines()[-1]))


async def watch(api: str) -> None:
    """What the experiment page does: its payload (retried until the experiment is
    listed), then its event stream, every delta parsed; prints how many on SIGTERM."""
    import signal

    import aiohttp

    counts = {"deltas": 0, "payload_bytes": 0}
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

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
