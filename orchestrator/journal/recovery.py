"""One trial's results put back together from every source, and what that took.

Plain data in, plain data out. The journal's segments (replayed by position, holes
where rows are lost: :func:`orchestrator.journal.sources.replay_with_holes`) are the
timeline; every other source (``result.json``, the checkpoints' metrics,
``progress.csv``, in that order of trust) is asked, by training iteration, for the rows
of each hole and for any row past the last one the journal knew (a log can be ahead of
the journal: the journal is extended from it). A hole no source fills is a loss, said
with its size and the iterations around it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.journal.sources import iteration_of

__all__ = ["Lost", "Recovered", "merge_trial", "ranges"]


@dataclass(frozen=True)
class Recovered:
    """Results of ``trial`` that only ``source`` still held, now in the journal."""

    trial: str
    source: str
    iterations: tuple[int, ...]

    def line(self) -> str:
        many = "s" if len(self.iterations) > 1 else ""
        return (
            f"trial {self.trial}: iteration{many} {ranges(self.iterations)} recovered from "
            f"{self.source}"
        )


@dataclass(frozen=True)
class Lost:
    """``count`` results of ``trial`` that no surviving source holds, after iteration
    ``after`` (None: from its first) and before ``before`` (None: at its end)."""

    trial: str
    count: int
    after: int | None
    before: int | None

    def line(self) -> str:
        where = []
        if self.after is not None:
            where.append(f"after iteration {self.after}")
        if self.before is not None:
            where.append(f"before iteration {self.before}")
        return (
            f"trial {self.trial}: LOST {self.count} result(s)"
            + (f" ({' and '.join(where)})" if where else "")
            + ": no surviving object holds them"
        )


def ranges(iterations: Sequence[int]) -> str:
    """``1-83, 90, 92-95``."""
    spans: list[list[int]] = []
    for i in sorted(iterations):
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def merge_trial(
    trial: str,
    positional: Sequence[Any],
    sources: Sequence[tuple[str, Mapping[int, Mapping[str, Any]]]],
) -> tuple[list[Any], list[Recovered], list[Lost]]:
    """``trial``'s results: ``positional`` (rows, ``None`` where lost) with its holes
    filled and its end extended from ``sources`` (``(where, rows by iteration)``, most
    trusted first); what each source gave, and what is lost."""
    known = [(pos, iteration_of(row)) for pos, row in enumerate(positional) if row is not None]
    holes = len(positional) - len(known)
    its = [it for _, it in known]
    if any(it is None for it in its) or any(
        b <= a for a, b in zip(its, its[1:], strict=False) if a is not None and b is not None
    ):  # rows without iterations, or not in iteration order: by position only
        rows = [row for row in positional if row is not None]
        return rows, [], [Lost(trial, holes, None, None)] if holes else []
    final: dict[int, Any] = {it: positional[pos] for pos, it in known if it is not None}
    windows = _windows(positional, known)
    last = max(final, default=0)
    recovered = []
    for where, by_iteration in sources:
        added = []
        for it, row in sorted(by_iteration.items()):
            if it in final or it <= 0:
                continue
            if it > last or any(lo < it < (hi or it + 1) for lo, hi, _ in windows):
                final[it] = dict(row)
                added.append(it)
        if added:
            recovered.append(Recovered(trial, where, tuple(added)))
    lost = []
    for lo, hi, expected in windows:
        got = sum(1 for it in final if lo < it and (hi is None or it < hi))
        if got < expected:
            lost.append(Lost(trial, expected - got, lo or None, hi))
    return [final[it] for it in sorted(final)], recovered, lost


def _windows(
    positional: Sequence[Any], known: Sequence[tuple[int, int | None]]
) -> list[tuple[int, int | None, int]]:
    """Each run of lost positions as ``(iteration before it or 0, iteration after it or
    None, how many rows it held)``."""
    by_pos = dict(known)
    windows = []
    pos = 0
    before = 0
    while pos < len(positional):
        if pos in by_pos:
            before = by_pos[pos] or 0
            pos += 1
            continue
        start = pos
        while pos < len(positional) and pos not in by_pos:
            pos += 1
        windows.append((before, by_pos.get(pos) if pos < len(positional) else None, pos - start))
    return windows
