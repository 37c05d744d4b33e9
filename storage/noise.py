"""Keeping the HTTP libraries' own failures out of the log.

During a storage outage aiohttp (under aiobotocore and gcloud-aio) can leave tasks of
its own whose connection error nobody retrieves; asyncio then logs each as "Task
exception was never retrieved" with a full traceback, dozens per outage, beside the one
line per retry that says what is going on. Our own code retrieves every exception it
causes, so on the event loops that run storage drivers such a report about a
connection error is noise: it goes to the debug log, and everything else to the
handler that was there before.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger("storage")

_UNRETRIEVED = "exception was never retrieved"


def _connection_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [ConnectionError, TimeoutError]
    try:
        import aiohttp

        errors += [aiohttp.ClientConnectionError, aiohttp.ClientPayloadError]
    except ImportError:  # no cloud driver installed: nothing of theirs to quiet
        pass
    return tuple(errors)


def quiet_sdk_noise(loop: asyncio.AbstractEventLoop) -> Any:
    """Install the filter on ``loop``; returns the handler it replaced (to restore)."""
    previous = loop.get_exception_handler()
    noise = _connection_errors()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if _UNRETRIEVED in str(context.get("message", "")) and isinstance(error, noise):
            log.debug("an HTTP library task failed (%s: %s)", type(error).__name__, error)
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
    return previous
