"""Handing items from a producer thread to the task that consumes them.

The transfer's reader and receiver each run a thread ahead of their loop (reading,
receiving or pulling frames) and pass what it made through a queue. A failure in the
thread must surface in the consumer, where Ray reports it, so the thread puts the
exception itself in the queue; ``END`` marks the end.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any

#: Put by a producer after its last item.
END = object()


def drain(handoff: queue.Queue[Any]) -> Iterator[Any]:
    """The items a producer thread puts in ``handoff``, in order, until ``END``; an
    exception it put there is raised here."""
    while True:
        item = handoff.get()
        if item is END:
            return
        if isinstance(item, BaseException):
            raise item
        yield item
        del item  # the consumer is done with it: do not keep it alive until the next
