"""What every benchmark does alike: a private Ray for a peer's run, and the figures file."""

from __future__ import annotations

import json
import logging
import os
import platform
import time
from pathlib import Path
from typing import Any


def init_private_ray(num_cpus: int) -> None:
    """``ray.init`` for a peer's run: a cluster of its own (never one already running
    here), quiet, with the same CPUs as ours gets."""
    import ray

    ray.init(
        address="local",
        num_cpus=num_cpus,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.WARNING,
    )


def ray_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("ray")
    except Exception:  # noqa: BLE001 - a figure, not a requirement
        return None


def write_figures(
    path: Path, benchmark: str, args: dict[str, Any], summary: Any, runs: list[Any]
) -> None:
    """The figures of every run so far and their summary, with the machine they ran on
    (written after each run: a crash keeps what was measured)."""
    document = {
        "benchmark": benchmark,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "ray": ray_version(),
            "platform": platform.platform(),
            "loadavg_now": os.getloadavg(),
        },
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in args.items()},
        "summary": summary,
        "runs": runs,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")


def wait_serving(proc: Any, url: str, timeout_s: float, what: str, log_name: str) -> None:
    """Wait until the server ``proc`` started answers HTTP at ``url`` (a moto server a
    benchmark started); an exit or ``timeout_s`` seconds without an answer raise."""
    import requests

    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited; see {log_name}")
        try:
            requests.get(url, timeout=1)
            return
        except requests.RequestException:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start within {timeout_s:.0f} s") from None
            time.sleep(0.2)


def end_process(proc: Any) -> None:
    """Terminate ``proc``, killing it if it has not ended 10 s later."""
    import subprocess

    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
