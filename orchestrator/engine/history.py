"""A finished trial's history, read back on demand from where the journal put it.

A sweep's finished trials stay in the driver for the whole experiment; their results
are in storage already (the journal wrote them), so the journal moves a finished
trial's results out of the driver's memory (:mod:`orchestrator.journal.spill`) and the
trial's record keeps this view instead: ``trial.results``, ``ResultGrid``, the loggers
and the sweep read it as a sequence, each read decoding the rows afresh (nothing is
kept). The loop turns it back into a list (:meth:`SpilledHistory.load`) before a trial
that leaves TERMINATED or ERROR gets a new result or a rollback.

The rows read back are the journal's JSON: a value the journal spells differently from
how it was reported (a tuple, a numpy number) reads back as a resumed driver reads it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, overload

__all__ = ["HistorySource", "SpilledHistory"]


class HistorySource(Protocol):
    """Where spilled histories are read from (the journal's spill)."""

    def history(self, key: Any) -> list[dict[str, Any]]:
        """The results stored under ``key``, decoded afresh."""
        ...


class SpilledHistory(Sequence[dict[str, Any]]):
    """``count`` results, read from ``source`` under ``key`` at each use."""

    __slots__ = ("_source", "_key", "_count")

    def __init__(self, source: HistorySource, key: Any, count: int) -> None:
        self._source = source
        self._key = key
        self._count = count

    def load(self) -> list[dict[str, Any]]:
        """The results, as a list of their own."""
        return self._source.history(self._key)

    def _read(self) -> list[dict[str, Any]]:
        return self._source.history(self._key)

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        return self._read()[index]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._read())

    def __bool__(self) -> bool:
        return self._count > 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SpilledHistory | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SpilledHistory({self._count} results)"
