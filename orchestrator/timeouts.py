"""Waiting with a deadline, without losing a cancellation.

Before Python 3.12, ``asyncio.wait_for`` returns normally when its task is cancelled in
the same loop step as what it awaits completes: the cancellation is lost (a sweep
cancelled as a result woke it ran all its trials on). ``asyncio.timeout`` keeps it, but
Python 3.10, which we support, has none. :func:`within` is both: every wait with a
deadline in this package goes through it (``tests/engine/test_cancellation.py`` scans
for any other).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["within"]

T = TypeVar("T")


async def within(seconds: float, awaitable: Awaitable[T]) -> T:
    """``await awaitable``, or ``TimeoutError`` (the built-in) after ``seconds``, when it
    is cancelled and awaited first. A cancellation of the caller always propagates, and
    cancels ``awaitable``."""
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except BaseException:
        task.cancel()
        raise
    if not done:
        task.cancel()
        await asyncio.wait({task})  # its end (a cancellation of the caller propagates)
        if task.cancelled() or task.exception() is not None:
            raise TimeoutError(f"not done within {seconds:g} s")
    return task.result()
