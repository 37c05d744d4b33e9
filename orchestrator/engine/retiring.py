"""Actors on their way out: told to shut down, killed once they have, or at a deadline.

A released actor runs its trial's cleanup and closes its storage before it goes, but
user code may hang there, so every shutdown has a deadline (the experiment's
``stop_grace_s``) after which the actor is killed anyway. An actor is killed as soon as
its shutdown answers (its resources may be what a waiting trial needs), or by the
loop's timer at the deadline; at exit, :meth:`Retiring.finish` waits for the shutdowns
still going, until their deadlines, then kills every one of them, so no worker process
of the experiment outlives it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

__all__ = ["Retiring"]


class Retiring:
    def __init__(self, grace_s: float, kill: Callable[[Any], None]) -> None:
        self._grace_s = grace_s
        self._kill = kill
        # By ``id(actor)``: the actor, its shutdown's ref, the loop time it goes anyway.
        self._actors: dict[int, tuple[Any, Any, float]] = {}

    def add(self, actor: Any, shutdown: Any) -> None:
        """``actor`` is shutting down (``shutdown``: the ref of its last call)."""
        loop = asyncio.get_running_loop()
        self._actors[id(actor)] = (actor, shutdown, loop.time() + self._grace_s)
        # The deadline's timer outlives this executor: it kills only an actor still here.
        loop.call_later(self._grace_s, self._kill_if_here, actor)
        shutdown.future().add_done_callback(functools.partial(self._answered, loop, actor))

    def _answered(self, loop: asyncio.AbstractEventLoop, actor: Any, _: Any) -> None:
        # On a Ray thread: hand over to the loop.
        if not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._kill_if_here, actor)
            except RuntimeError:  # the loop closed meanwhile
                pass

    def _kill_if_here(self, actor: Any) -> None:
        if id(actor) in self._actors:  # not killed already (its deadline, a Kill, the exit)
            self.kill(actor)

    def kill(self, actor: Any) -> None:
        """It shut down (or ran out of time): it goes now."""
        self._actors.pop(id(actor), None)
        self._kill(actor)

    async def finish(self) -> None:
        """At exit: wait for the shutdowns still going, until their deadlines, then kill
        those actors; the loop's timers that would have will not run any more."""
        actors, self._actors = list(self._actors.values()), {}
        if not actors:
            return
        loop = asyncio.get_running_loop()
        wait = max(deadline for _, _, deadline in actors) - loop.time()
        futures = [asyncio.wrap_future(ref.future()) for _, ref, _ in actors]
        try:
            if wait > 0:
                await asyncio.wait(futures, timeout=wait)
        finally:
            for future in futures:
                if future.done() and not future.cancelled():
                    future.exception()  # retrieved: a failed shutdown is no news now
                else:
                    future.cancel()
            for actor, _, _ in actors:
                self._kill(actor)
