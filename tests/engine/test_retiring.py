"""A retiring actor is killed once: when its shutdown answers, at its deadline, or at
the exit, whichever comes first; the deadline's timer, which outlives its executor on a
long-lived loop, kills nothing that is gone already."""

from __future__ import annotations

import concurrent.futures
from typing import Any

from orchestrator.engine.retiring import Retiring

from ..support.fake_engine import until


class Ref:
    """What Ray's ObjectRef gives the retiring book: a future of the shutdown call."""

    def __init__(self) -> None:
        self.done: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def future(self) -> concurrent.futures.Future[Any]:
        return self.done


async def test_an_actor_is_killed_once_whatever_comes_first() -> None:
    killed: list[str] = []
    retiring = Retiring(60.0, killed.append)  # no deadline passes here, however slow
    answers, hangs, killed_by_hand = Ref(), Ref(), Ref()
    retiring.add("answers", answers)
    retiring.add("hangs", hangs)
    retiring.add("by hand", killed_by_hand)
    retiring.kill("by hand")  # a Kill follow-up, say
    answers.done.set_result(None)
    await until(lambda: len(killed) >= 2)
    assert killed == ["by hand", "answers"]  # at once, not at the deadline
    hangs.done.set_result(None)  # answers at last
    await until(lambda: len(killed) >= 3)
    await retiring.finish()
    assert killed == ["by hand", "answers", "hangs"]  # each once


async def test_a_shutdown_that_never_answers_is_killed_at_its_deadline() -> None:
    killed: list[str] = []
    retiring = Retiring(0.2, killed.append)
    retiring.add("hangs", Ref())
    await until(lambda: killed == ["hangs"])
    await retiring.finish()
    assert killed == ["hangs"]  # once: not again at the exit
