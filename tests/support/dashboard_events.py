"""Reading the dashboard's server-sent events (the local and the remote dashboard tests)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

#: Seconds a new result may take to reach a stream on a loaded machine (the issue's
#: figure is about 2 s; the poll is 0.5 s).
LIVE_TIMEOUT_S = 30.0


async def next_event(stream: aiohttp.ClientResponse, kind: str) -> Any:
    """The data of the next server-sent event of ``kind``."""
    current: dict[str, str] = {}
    async for raw in stream.content:
        line = raw.decode().rstrip("\n")
        if not line:
            if current.get("event") == kind:
                return json.loads(current["data"])
            current = {}
        elif not line.startswith(":"):
            field, _, value = line.partition(": ")
            current[field] = value
    raise AssertionError("the stream ended")
