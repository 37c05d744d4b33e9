"""What the journal does with a trial that ended, once a committed write holds it.

Its results leave memory for the spill file (:mod:`orchestrator.journal.spill`), its
record keeping a :class:`~orchestrator.engine.history.SpilledHistory`; and its record
becomes a tombstone (:mod:`orchestrator.engine.tombstone`): spec, machine, config and
events pickled into the same file. Issue 36: a finished trial's history and record live
out of the driver's memory, so ten thousand trials cost little more than ten.

A trial that cannot retire yet (its last results not stored, its actor still being
released) is asked again after the next write, and so is one whose record was brought
back (the loop or a reader opened its tombstone) while it stayed ended.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING

from orchestrator.engine.c_heap import give_back_freed_memory
from orchestrator.engine.history import SpilledHistory
from orchestrator.engine.tombstone import Sealer
from orchestrator.journal.spill import SpillFile, SpillRef

if TYPE_CHECKING:
    from orchestrator.engine.trial_runtime import TrialRuntime

__all__ = ["Retirement", "give_back_freed_memory"]

#: Trials retired between two returns of freed memory to the system
#: (:func:`~orchestrator.engine.c_heap.give_back_freed_memory`, by a write's build thread).
TRIM_EVERY = 256


class Retirement:
    """The spill file and the sealer of one journal, and the trials to ask again."""

    def __init__(self) -> None:
        self.spill: SpillFile | None = None
        # Sealed trials' parts of the journal's head, kept by the writer in a file of
        # their own so that a write's build reads them all in one go.
        self.heads: SpillFile | None = None
        self._sealer: Sealer | None = None
        self._again: set[str] = set()
        self._since_trim = 0  # trials retired since freed memory was last given back

    def retire(
        self,
        ended: list[str],
        trials: Mapping[str, TrialRuntime],
        results: MutableMapping[str, list[str] | SpillRef],
        stored: Mapping[str, int],
    ) -> list[str]:
        """After a committed write: spill and seal the trials in ``ended`` (and those to
        ask again) that are over. ``results`` maps each trial to its serialised rows,
        replaced here by their place in the spill; ``stored`` says how many of them the
        journal's listed segments hold. Returns the trials sealed now. On the loop."""
        sealer = self._sealer
        if sealer is not None and sealer.reopened:
            self._again |= sealer.reopened  # the loop or a reader opened them
            sealer.reopened = set()
        if self._again:
            ended = [*ended, *self._again.difference(ended)]
            self._again = set()
        touched = False
        sealed: list[str] = []
        for trial_id in ended:
            rows = results.get(trial_id)
            trial = trials.get(trial_id)
            if trial is None or rows is None or not trial.state.is_terminal:
                continue  # gone, or back: among the ended again when it ends
            spill = self.spill
            if spill is None:
                spill = self.spill = SpillFile()
            if isinstance(rows, list) and rows:
                if stored[trial_id] != len(rows) or len(trial.results) != len(rows):
                    # Not all stored yet, or its history is not the journal's copy yet.
                    self._again.add(trial_id)
                    continue
                ref = results[trial_id] = spill.put(rows)
                trial.results = SpilledHistory(spill, ref, ref.count)  # type: ignore[assignment]
            elif isinstance(rows, SpillRef) and isinstance(trial.results, list):
                # Back and ended again with the same results: the loop made its view a
                # list, and no new result or rollback read the rows back.
                if len(trial.results) == rows.count:
                    trial.results = SpilledHistory(spill, rows, rows.count)  # type: ignore[assignment]
            if sealer is None:
                sealer = self._sealer = Sealer(spill)
            was_sealed = trial.sealed
            done = trial.seal(sealer)  # its record becomes a tombstone
            if done is None:
                self._again.add(trial_id)  # not over yet: after the next write
            elif done and not was_sealed:
                sealed.append(trial_id)
            touched = True
        if touched and self.spill is not None:
            self.spill.flush()
        self._since_trim += len(sealed)
        return sealed

    def trim_due(self) -> bool:
        """Whether the next write gives freed memory back (:func:`give_back_freed_memory`),
        and if so, counting starts again."""
        if self._since_trim < TRIM_EVERY:
            return False
        self._since_trim = 0
        return True

    def keep_head(self, part: str) -> tuple[int, int]:
        """Put a sealed trial's part of the journal's head in the heads file; returns
        where (offset, length in bytes). Read back by :meth:`head_part` or, for a whole
        write, :meth:`SpillFile.head_of`."""
        heads = self.heads
        if heads is None:
            heads = self.heads = SpillFile()
        ref = heads.put_blob(part.encode())
        heads.flush()
        return ref.offset, ref.length

    def head_part(self, offset: int, length: int) -> str:
        assert self.heads is not None
        return self.heads.get_blob(SpillRef(offset, length, 0)).decode()
