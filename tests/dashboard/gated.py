"""A function trainable for the browser test: it reports ``before`` results, waits
for the file ``gate`` to exist, then reports ``after`` more (or fails, with ``fail``)."""

from __future__ import annotations

import os
import time
from typing import Any

from orchestrator import report


def gated(config: dict[str, Any]) -> None:
    scale = float(config.get("scale", 1.0))
    for i in range(int(config["before"])):
        report({"loss": scale / (i + 1), "accuracy": 1 - scale / (i + 2)})
    if config.get("fail"):
        raise ValueError(f"the loss diverged (scale {scale})")
    deadline = time.monotonic() + 600
    while not os.path.exists(config["gate"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    before = int(config["before"])
    for i in range(before, before + int(config["after"])):
        report({"loss": scale / (i + 1), "accuracy": 1 - scale / (i + 2)})
