"""A sweep's searcher thread: calls in order off the loop, the state kept for the
journal, and no work queued once the sweep's call has ended (a trial settling as the
experiment closes after a cancelled call used to crash the loop's close)."""

from __future__ import annotations

from typing import Any

from orchestrator.core.codec import unpickle_b64
from orchestrator.search import RandomSearch, SearchSpace, uniform
from orchestrator.sweeps.searcher_thread import SearcherThread


async def test_suggestions_keep_the_state_and_a_closed_thread_takes_no_work() -> None:
    searcher = RandomSearch(seed=1)
    thread = SearcherThread(searcher, "s")
    space = SearchSpace({"x": uniform(0, 1)})
    await thread.call(searcher.setup, space, metric=None, mode=None, num_samples=3, seed=1)
    config = await thread.call(thread.suggest, "s_00000")
    assert config is not None and thread.state is not None
    assert unpickle_b64(thread.state) == searcher.get_state()
    done: list[Any] = []
    assert thread.submit(done.append, "before")
    await thread.close()
    assert done == ["before"] and thread.closed
    assert not thread.submit(done.append, "after")  # no RuntimeError from the pool
    assert done == ["before"]
