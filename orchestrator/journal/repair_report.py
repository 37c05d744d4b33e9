"""What ``repair`` found and did, as data (for tests and callers) and in words (for the
command): every damaged object and what it held, which results came from where, which
are lost. See :mod:`orchestrator.journal.repair`."""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.core.journal_format import SEALED_PREFIX, SEGMENTS_PREFIX
from orchestrator.journal.recovery import Lost, Recovered
from orchestrator.journal.sources import Damaged

__all__ = ["RepairReport"]


@dataclass(frozen=True)
class RepairReport:
    """What a repair found and did. ``action``: ``"intact"`` (nothing done),
    ``"backup"`` (the backup became the head) or ``"rebuilt"``."""

    uri: str
    action: str
    problem: str | None = None  # what was damaged first, in words
    trials: int = 0
    whole: int = 0  # trials whose journaled entry survived
    spec_lost: list[str] = field(default_factory=list)
    results: int = 0
    segments: int = 0  # segments read
    kept_aside: str | None = None  # where the damaged head was kept
    damaged: list[Damaged] = field(default_factory=list)  # every damaged object
    recovered: list[Recovered] = field(default_factory=list)  # results from elsewhere
    lost: list[Lost] = field(default_factory=list)  # results no object holds
    blobs_swept: int = 0  # blobs of content-addressed checkpoints that none named
    # Trial entries a damaged or missing sealed object held that no object still holds
    # (the head lists how many each held; which trials, only the object said).
    entries_lost: int = 0

    @property
    def complete(self) -> bool:
        """Every result that existed anywhere is in the repaired journal."""
        return not self.lost and not self.entries_lost

    def lines(self) -> list[str]:
        """The report in words, one line each."""
        swept = [f"deleted {self.blobs_swept} blob(s) that no checkpoint names"]
        return self._journal_lines() + (swept if self.blobs_swept else [])

    def _journal_lines(self) -> list[str]:
        if self.action == "intact":
            whole = f"the journal at {self.uri} reads whole ({self.trials} trial(s))"
            if not self.damaged:
                return [f"{whole}: nothing to do"]
            return [d.line() for d in self.damaged] + [f"{whole}: its backup is rewritten from it"]
        lines = [d.line() for d in self.damaged] or [f"damaged: {self.problem}"]
        if self.action == "backup":
            lines.append(
                f"restored the head from its backup (the journal's last write): "
                f"{self.trials} trial(s), {self.results} result(s)"
            )
        else:
            lines.append(
                f"rebuilt the journal from what survives: {self.trials} trial(s), "
                f"{self.whole} whole from the head or its backup, {self.results} "
                f"result(s), read from {self.segments} segment(s) and the trials' logs"
            )
        lines += [r.line() for r in self.recovered]
        lines += [x.line() for x in self.lost]
        if self.spec_lost:
            lines.append(
                f"{len(self.spec_lost)} trial(s) lost their spec with the head (now ERROR, "
                f"their results and checkpoints kept): {', '.join(self.spec_lost)}; under "
                "resume=True, the add_trial call of each one's trainable and config (or "
                "one with trial_id=<its id>) continues it from its newest checkpoint"
            )
        if self.kept_aside:
            lines.append(f"the old head is kept as {self.kept_aside}")
        ours = (SEGMENTS_PREFIX, SEALED_PREFIX)
        if self.action == "rebuilt" and any(p in d.where for d in self.damaged for p in ours):
            lines.append(
                "the damaged segments that are there are kept beside it, in "
                "experiment_state.damaged-<time>.results/"
            )
        if self.entries_lost:
            lines.append(
                f"{self.entries_lost} sealed trial entr{'y' if self.entries_lost == 1 else 'ies'}"
                " could not be saved (their object is damaged or missing): their results "
                "are the ones named above as recovered from their logs, if any"
            )
        if self.lost:
            count = sum(x.count for x in self.lost)
            lines.append(f"{count} result(s) could not be saved: no surviving object holds them")
        else:
            lines.append("every result that survives anywhere is in the repaired journal")
        return lines
